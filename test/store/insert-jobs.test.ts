/** insertJobs and idempotency keys: a replay writes nothing, and a concurrent insert of the same key returns the committed job. */
import pg from 'pg';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { z } from 'zod';
import { createSkiplock, defineTask } from '../../src/index.ts';
import { insertJobs } from '../../src/store/enqueue.ts';
import { statement } from '../../src/store/sql.ts';
import { createTestDb, type TestDb } from '../support/db.ts';

let db: TestDb;
beforeAll(async () => (db = await createTestDb()));
afterAll(() => db.drop());

const echo = defineTask({ name: 'echo', payload: z.object({ n: z.number() }), handler: () => null });
const skiplock = () => createSkiplock({ sql: db.sql, tasks: [echo], log: () => {} });

const version = async (id: string) =>
  (await db.sql.query<{ xmin: string; ctid: string }>(statement(
    // Both rows of a live job: its record and its queue row (migration 021).
    `SELECT r.xmin::text AS xmin, r.ctid::text AS ctid, q.xmin::text AS queue_xmin, q.ctid::text AS queue_ctid
       FROM skiplock.job_record r JOIN skiplock.queue q ON q.id = r.id WHERE r.id = $1`, [id])))[0];

test('replaying an idempotency key returns the original job and writes no row version', async () => {
  const queue = skiplock();
  const first = await queue.enqueueWithResult({ task: 'echo', payload: { n: 1 }, idempotencyKey: 'replay-1' });
  expect(first.created).toBe(true);
  const before = await version(first.job.id);

  const again = await queue.enqueueWithResult({ task: 'echo', payload: { n: 2 }, idempotencyKey: 'replay-1' });
  expect(again).toEqual({ job: first.job, created: false });
  // A batch mixing new jobs and a replay: the new ones inserted, the replay returned unchanged, in input order.
  const batch = await queue.enqueueBatch([
    { task: 'echo', payload: { n: 3 } },
    { task: 'echo', payload: { n: 4 }, idempotencyKey: 'replay-1' },
    { task: 'echo', payload: { n: 5 }, idempotencyKey: 'replay-2' },
  ]);
  expect(batch.map((r) => [r.job.payload, r.created])).toEqual([[{ n: 3 }, true], [{ n: 1 }, false], [{ n: 5 }, true]]);
  expect(batch[1]!.job).toEqual(first.job);
  // Same xmin and same ctid: the row was neither updated nor locked into a new version.
  expect(await version(first.job.id)).toEqual(before);
});

test('two concurrent inserts of one key: the second waits, then returns the job the first committed', async () => {
  const other = new pg.Client({ connectionString: db.url });
  await other.connect();
  try {
    await other.query('BEGIN');
    const mine = insertJobs({
      now: null,
      jobs: [{ task: 'echo', payload: { n: 1 }, priority: 0, run_at: null, delay_ms: 0, max_attempts: 5, timeout_ms: 10_000, idempotency_key: 'race', schedule_name: null, scheduled_for: null }],
    });
    const [held] = (await other.query(mine.text, [...mine.values])).rows;
    // The second enqueue blocks on the first's uncommitted row (the unique index's speculative insertion).
    const second = skiplock().enqueueWithResult({ task: 'echo', payload: { n: 2 }, idempotencyKey: 'race' });
    for (let i = 0; ; i++) {
      const [row] = await db.sql.query<{ n: number }>(
        statement(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`),
      );
      if (row!.n > 0) break;
      if (i > 200) throw new Error('the second insert never waited');
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    await other.query('COMMIT');
    const result = await second;
    expect(result.created).toBe(false);
    expect(result.job.id).toBe(String(held.id));
    expect(result.job.payload).toEqual({ n: 1 });
  } finally {
    await other.end();
  }
});
