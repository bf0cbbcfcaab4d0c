/**
 * The record's end is HOT (migration 025; docs/benchmarks.md, "Issue 33: the data model"): the
 * UPDATE that ends a job DONE changes no column a btree index of skiplock.job_record names, and the
 * record's page keeps room for the new version, so the new version stays on the page and writes no
 * index entry. Jobs enqueued together, as a batch or a bulk insert writes them, share pages: at
 * fillfactor 80 only about a quarter of their ends found room, and with an ordered index on
 * finished_at (job_failed_finished_idx, migration 021) none could be HOT at all.
 */
import { afterAll, beforeAll, expect, test } from 'vitest';
import { z } from 'zod';
import { createSkiplock, defineTask } from '../../src/index.ts';
import { createPgDriver } from '../../src/store/drivers/pg.ts';
import { statement } from '../../src/store/sql.ts';
import { createTestDb, type TestDb } from '../support/db.ts';
import { waitFor } from '../bench/harness.ts';

let db: TestDb;
beforeAll(async () => (db = await createTestDb()));
afterAll(() => db.drop());

const echo = defineTask({ name: 'echo', payload: z.object({ n: z.number() }), handler: () => ({ ok: true }) });
const broken = defineTask({ name: 'broken', payload: z.object({}), maxAttempts: 1, handler: () => {
  throw new Error('broken');
} });
const record = async (id: string) =>
  (await db.sql.query<{ status: string; failed_status: string | null; same: boolean | null }>(statement(
    `SELECT status, failed_status, failed_at = finished_at AS same FROM skiplock.job_record WHERE id = $1`, [id])))[0];

test('a batch of jobs ended DONE: most of their records are HOT updates', async () => {
  // Its own connections: closed after the run, their backends report their counts as they exit.
  const sql = createPgDriver(db.url, { max: 2 });
  try {
    const queue = createSkiplock({ sql, tasks: [echo], log: () => {}, retention: false });
    await queue.enqueueBatch(Array.from({ length: 300 }, (_, n) => ({ task: 'echo', payload: { n } })));
    expect(await queue.tick({ untilIdle: true, budgetMs: 30_000 })).toMatchObject({ done: 300 });
  } finally {
    await sql.close();
  }
  const counts = async () =>
    (await db.sql.query<{ upd: number; hot: number }>(statement(
      `SELECT n_tup_upd::int AS upd, n_tup_hot_upd::int AS hot FROM pg_stat_user_tables WHERE relid = 'skiplock.job_record'::regclass`)))[0]!;
  await waitFor(async () => (await counts()).upd >= 300, 'the updates counted', 20_000, 50);
  const { upd, hot } = await counts();
  expect(upd).toBe(300);
  expect(hot / upd).toBeGreaterThanOrEqual(0.7);
});

test('a failed end keeps its finish in failed_at, which a retry clears: retention finds failed records in finish order by it', async () => {
  const queue = createSkiplock({ sql: db.sql, tasks: [echo, broken], log: () => {}, retention: { doneMs: 3_600_000, cancelledMs: 60_000 } });
  const dead = await queue.enqueue({ task: 'broken', payload: {} });
  const fine = await queue.enqueue({ task: 'echo', payload: { n: 1 } });
  await queue.tick({ untilIdle: true });
  expect(await record(dead.id)).toEqual({ status: 'DEAD', failed_status: 'DEAD', same: true });
  expect(await record(fine.id)).toEqual({ status: 'DONE', failed_status: null, same: null });
  await queue.retryJob(dead.id);
  expect(await record(dead.id)).toEqual({ status: 'QUEUED', failed_status: null, same: null });
  await queue.tick({ untilIdle: true });
  expect(await record(dead.id)).toEqual({ status: 'DEAD', failed_status: 'DEAD', same: true });
  const cancelled = await queue.enqueue({ task: 'echo', payload: { n: 2 }, runAt: new Date(Date.now() + 3_600_000) });
  await queue.cancelJob(cancelled.id);
  expect(await record(cancelled.id)).toEqual({ status: 'CANCELLED', failed_status: 'CANCELLED', same: true });
  // The next retention pass: the cancelled record's expiry (a minute) + the slack (an hour), before the DONE one's.
  await db.sql.query(statement(`UPDATE skiplock.job_record SET finished_at = now() - interval '30 seconds', failed_at = now() - interval '30 seconds' WHERE id = $1`, [cancelled.id]));
  const ms = (await queue.msUntilNextWork({ budgetMs: 25_000 }))!;
  expect(ms).toBeGreaterThan(3_600_000 + 25_000);
  expect(ms).toBeLessThanOrEqual(3_600_000 + 30_000);
});
