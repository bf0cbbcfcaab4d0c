/**
 * stats() (GET /v1/stats, /metrics, the dashboard) reads the jobs that are not DONE exactly and
 * never counts the DONE rows that are most of a large table: up to STATS_DONE_EXACT_LIMIT of them
 * are counted, beyond that their number is the planner's estimate of the table less the exact rest,
 * split by task as the newest DONE jobs are, and marked `doneCount: 'estimated'`.
 */
import { afterAll, beforeAll, beforeEach, expect, test } from 'vitest';
import { renderMetrics } from '../../src/http/prometheus.ts';
import { createSkiplock, type Skiplock } from '../../src/runtime/skiplock.ts';
import { STATS_DONE_EXACT_LIMIT } from '../../src/store/admin.ts';
import { statement } from '../../src/store/sql.ts';
import { exampleTasks } from '../../src/tasks/examples.ts';
import { createTestDb, type TestDb } from '../support/db.ts';

let db: TestDb;
let skiplock: Skiplock;
beforeAll(async () => {
  db = await createTestDb();
  skiplock = createSkiplock({ sql: db.sql, tasks: exampleTasks, log: () => {}, retention: false });
});
afterAll(() => db.drop());
beforeEach(() => db.emptyJobs());

const insert = (sql: string) => db.sql.query(statement(sql));
const DONE = (n: number, task: string) =>
  insert(`INSERT INTO skiplock.job (task, payload, status, attempts, finished_at) SELECT '${task}', '{}', 'DONE', 1, now() FROM generate_series(1, ${n})`);

test('live jobs counted exactly, due told from scheduled (the depth); a few DONE jobs counted exactly', async () => {
  await insert(`INSERT INTO skiplock.job (task, payload, run_at) SELECT 'echo', '{}', now() - interval '2 seconds' FROM generate_series(1, 2)`);
  await insert(`INSERT INTO skiplock.job (task, payload, run_at) SELECT 'echo', '{}', now() + interval '1 hour' FROM generate_series(1, 3)`);
  await insert(`INSERT INTO skiplock.job (task, payload, status, attempts, locked_by, locked_until) VALUES ('sleep', '{}', 'RUNNING', 1, 'w', now() + interval '1 minute')`);
  await insert(`INSERT INTO skiplock.job (task, payload, status, attempts, finished_at) VALUES ('poison', '{}', 'DEAD', 1, now()), ('echo', '{}', 'CANCELLED', 0, now())`);
  await DONE(5, 'echo');
  const stats = await skiplock.stats();
  expect(stats.counts).toEqual({ QUEUED: 5, RUNNING: 1, WAITING: 0, DONE: 5, DEAD: 1, CANCELLED: 1 });
  expect(stats.byTask.echo).toEqual({ QUEUED: 5, RUNNING: 0, WAITING: 0, DONE: 5, DEAD: 0, CANCELLED: 1 });
  expect(stats.depth).toEqual({ due: 2, scheduled: 3, running: 1, waiting: 0 });
  expect(stats.doneCount).toBe('exact');
  expect(stats.oldestQueuedAgeMs).toBeGreaterThanOrEqual(2_000);
  const metrics = renderMetrics(stats, skiplock.tickTotals());
  expect(metrics).toMatch(/^skiplock_queue_depth\{state="due"\} 2$/m);
  expect(metrics).toMatch(/^skiplock_queue_depth\{state="scheduled"\} 3$/m);
});

test('more DONE jobs than it counts: DONE estimated from the table size, split like the newest ones; the rest still exact', async () => {
  const done = STATS_DONE_EXACT_LIMIT * 3;
  // Interleaved, two thirds echo: the newest DONE jobs are split as the whole is.
  await insert(`INSERT INTO skiplock.job (task, payload, status, attempts, finished_at)
                SELECT CASE WHEN g % 3 = 0 THEN 'sleep' ELSE 'echo' END, '{}', 'DONE', 1, now() FROM generate_series(1, ${done}) g`);
  await insert(`INSERT INTO skiplock.job (task, payload) SELECT 'echo', '{}' FROM generate_series(1, 7)`);
  await insert(`ANALYZE skiplock.job_record`);
  const stats = await skiplock.stats();
  expect(stats.doneCount).toBe('estimated');
  expect(stats.counts.QUEUED).toBe(7);
  expect(stats.depth).toEqual({ due: 7, scheduled: 0, running: 0, waiting: 0 });
  expect(stats.counts.DONE).toBeGreaterThan(done * 0.8);
  expect(stats.counts.DONE).toBeLessThan(done * 1.2);
  expect(stats.byTask.echo!.DONE / stats.counts.DONE).toBeCloseTo(2 / 3, 1);
  expect(stats.byTask.echo!.QUEUED).toBe(7);
});
