import { afterAll, beforeAll, beforeEach, expect, test } from 'vitest';
import { ALARM_INTERVAL_MS, tickAndPlanNext } from '../../src/runtime/alarm-ticker.ts';
import { createSkiplock, type Skiplock } from '../../src/runtime/skiplock.ts';
import { statement } from '../../src/store/sql.ts';
import { exampleTasks } from '../../src/tasks/examples.ts';
import { createTestDb, type TestDb } from '../support/db.ts';

let db: TestDb;
let skiplock: Skiplock;
const TICK = { budgetMs: 5_000, pollIntervalMs: 20 };

beforeAll(async () => {
  db = await createTestDb();
  skiplock = createSkiplock({ sql: db.sql, tasks: exampleTasks, log: () => {} });
});
afterAll(() => db.drop());
beforeEach(() => db.sql.query(statement(`TRUNCATE skiplock.job CASCADE`)));

const insert = (sql: string) => db.sql.query(statement(sql));

test('an empty queue: the ticker sleeps until woken', async () => {
  expect((await tickAndPlanNext(skiplock, TICK)).nextInMs).toBeNull();
});

test('due work is done now; finished work leaves nothing to wake up for', async () => {
  await insert(`INSERT INTO skiplock.job (task, payload, timeout_ms) VALUES ('echo', '{"message":"x"}', 1000)`);
  const { result, nextInMs } = await tickAndPlanNext(skiplock, TICK);
  expect(result.done).toBe(1);
  expect(nextInMs).toBeNull();
});

test('a job due later: wake up when it is due', async () => {
  await insert(`INSERT INTO skiplock.job (task, payload, run_at) VALUES ('echo', '{"message":"x"}', now() + interval '30 seconds')`);
  const { nextInMs } = await tickAndPlanNext(skiplock, TICK);
  expect(nextInMs).toBeGreaterThan(28_000);
  expect(nextInMs).toBeLessThanOrEqual(30_000);
});

test('a retry due in under a second, or a job running elsewhere: tick again in a second', async () => {
  await insert(`INSERT INTO skiplock.job (task, payload, run_at, timeout_ms) VALUES ('echo', '{"message":"x"}', now() + interval '200 milliseconds', 1000)`);
  await insert(`INSERT INTO skiplock.job (task, payload, status, attempts, locked_by, locked_until)
                VALUES ('sleep', '{"ms":1}', 'RUNNING', 1, 'elsewhere', now() + interval '1 hour')`);
  const first = await tickAndPlanNext(skiplock, { ...TICK, budgetMs: 100, marginMs: 50 });
  expect(first.nextInMs).toBe(ALARM_INTERVAL_MS);
  await new Promise((resolve) => setTimeout(resolve, 300));
  const second = await tickAndPlanNext(skiplock, TICK);
  expect(second.result.done).toBe(1);
  // A job running elsewhere may fail any moment with a retry due in a second (the enqueue's own
  // tick runs the first attempt): sleeping until its lease expires left that retry waiting.
  expect(second.nextInMs).toBe(ALARM_INTERVAL_MS);
});
