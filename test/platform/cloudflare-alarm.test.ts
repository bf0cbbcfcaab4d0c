/**
 * The opt-in Durable Object ticker (TICKER = "alarm") in workerd: without any cron invocation,
 * the alarm follows up work an enqueue left behind — here the retries of a `flaky` job, due
 * about a second after each failure — and wakes up for each instant of a schedule.
 */
import { afterAll, beforeAll, expect, test } from 'vitest';
import type { WranglerDev } from '../../src/dev/wrangler-dev.ts';
import { statement } from '../../src/store/sql.ts';
import type { TestDb } from '../support/db.ts';
import { startWorkerUnderTest, type WorkerUnderTest } from './worker-under-test.ts';

const TOKEN = 'alarm-test-token';
let under: WorkerUnderTest;
let db: TestDb;
let worker: WranglerDev;

beforeAll(async () => {
  under = await startWorkerUnderTest({ API_TOKEN: TOKEN, TICKER: 'alarm', ALARM_TICK_BUDGET_MS: '12000' });
  ({ db, worker } = under);
});

afterAll(() => under?.stop());

test('the alarm ticks while there is work: a flaky job retries to DONE with no cron at all', async () => {
  const response = await fetch(`${worker.url}/v1/jobs`, {
    method: 'POST',
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify({ task: 'flaky', payload: { failTimes: 2 } }),
  });
  expect(response.status).toBe(201);
  const { job } = (await response.json()) as { job: { id: string } };

  const deadline = Date.now() + 15_000;
  let row: Record<string, unknown> | undefined;
  while (Date.now() < deadline) {
    [row] = await db.sql.query(statement(`SELECT status, attempts, result FROM skiplock.job WHERE id = $1`, [job.id]));
    if (row?.status === 'DONE') break;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  expect(row).toMatchObject({ status: 'DONE', attempts: 3, result: { attempts: 3 } });
});

test('the alarm wakes up for each instant of a schedule, with an idle queue and no cron', async () => {
  // A per-2-seconds schedule stands in for `*/10 * * * * *` (six a minute), to wait seconds, not a minute.
  const put = await fetch(`${worker.url}/v1/schedules/every-2s`, {
    method: 'PUT',
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify({ cron: '*/2 * * * * *', task: 'echo', payload: { message: 'every 2 s' } }),
  });
  expect(put.status).toBeLessThan(300);
  // An enqueue wakes the ticker; after its one job the queue is idle.
  const woke = await fetch(`${worker.url}/v1/jobs`, {
    method: 'POST',
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify({ task: 'echo', payload: { message: 'wake up' } }),
  });
  expect(woke.status).toBe(201);

  await new Promise((resolve) => setTimeout(resolve, 11_000));
  const rows = await db.sql.query<{ at: Date; status: string }>(statement(
    `SELECT f.scheduled_for AS at, j.status FROM skiplock.cron_firing f JOIN skiplock.job j ON j.id = f.job_id
      WHERE f.schedule_name = 'every-2s' ORDER BY f.scheduled_for`,
  ));
  const instants = rows.map((r) => new Date(r.at).getTime());
  // Every instant from the first one fired (none dropped by catch-up 'latest'), and each job ran.
  expect(instants.length).toBeGreaterThanOrEqual(4);
  expect(instants.slice(1).map((t, i) => t - instants[i]!)).toEqual(Array(instants.length - 1).fill(2_000));
  expect(rows.slice(0, -1).every((r) => r.status === 'DONE')).toBe(true);
});
