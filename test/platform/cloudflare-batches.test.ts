/**
 * Batch handlers in the real Workers runtime (wrangler dev), with the Durable Object ticker and no
 * cron fired (issue 35 item 2): items enqueued from the user's route wait for the group's
 * maxWaitMs and then run as one call, woken by the alarm the wake state set (the oldest item's
 * run_at + maxWaitMs), over the Neon driver through the local proxy.
 */
import { afterAll, beforeAll, expect, test } from 'vitest';
import { startWorkerUnderTest, type WorkerUnderTest } from './worker-under-test.ts';
import { untilStatus } from '../support/job-rows.ts';
import { statement } from '../../src/store/sql.ts';

let under: WorkerUnderTest;

beforeAll(async () => {
  under = await startWorkerUnderTest({ API_TOKEN: 'batch-test-token-0123456789', TICK_POLL_INTERVAL_MS: '200' }, { config: 'test/fixtures/wake-worker/wrangler.toml' });
}, 120_000);
afterAll(() => under?.stop());

const results = async (ids: readonly string[]) =>
  (await under.db.sql.query(statement(`SELECT result FROM skiplock.job WHERE id = ANY($1::bigint[]) ORDER BY id`, [ids]))).map((r) => r.result);

const mail = async (n: number) => {
  const response = await fetch(`${under.worker.url}/mail?n=${n}`, { method: 'POST' });
  expect(response.status).toBe(200);
  return ((await response.json()) as { ids: string[] }).ids;
};

test('items below maxSize run as one call once the oldest has waited maxWaitMs, woken by the alarm (no cron)', async () => {
  const ids = await mail(5);
  const done = [];
  for (const id of ids) done.push(await untilStatus(under.db.sql, id, 'DONE', 15_000));
  for (const row of done) expect(row).toMatchObject({ status: 'DONE', attempts: 1 });
  expect(await results(ids)).toEqual(ids.map(() => ({ callSize: 5 })));
  const waited = done.map((row) => (row.started_at as Date).getTime() - (row.run_at as Date).getTime());
  console.log(`workerd, batch start − oldest run_at: ${Math.min(...waited)} ms (maxWaitMs 1500)`);
  expect(Math.min(...waited)).toBeGreaterThanOrEqual(1_500);
  expect(Math.max(...waited)).toBeLessThan(1_500 + 2_000);
});

test('maxSize items due run at once, as one call', async () => {
  const ids = await mail(50);
  const first = await untilStatus(under.db.sql, ids[0]!, 'DONE', 10_000);
  expect(first).toMatchObject({ status: 'DONE' });
  expect(await results(ids)).toEqual(ids.map(() => ({ callSize: 50 })));
  expect((first.started_at as Date).getTime() - (first.run_at as Date).getTime()).toBeLessThan(1_500);
});
