/**
 * The Node runner's wake state (memory): a job enqueued from your own code through the runner's
 * skiplock starts at once; a delayed one at its runAt; and an idle runner makes no statement (no
 * polling every second). Start latencies are printed (the machine is shared and loaded).
 */
import { afterAll, beforeAll, expect, test } from 'vitest';
import { startNodeRunner, type NodeRunner } from '../../src/platform/node/runner.ts';
import { createSkiplock, type Skiplock } from '../../src/runtime/skiplock.ts';
import type { Sql, Statement } from '../../src/store/sql.ts';
import { statement } from '../../src/store/sql.ts';
import { exampleTasks } from '../../src/tasks/examples.ts';
import { createTestDb, type TestDb } from '../support/db.ts';

let db: TestDb;
let skiplock: Skiplock;
let runner: NodeRunner;
let statements = 0;

beforeAll(async () => {
  db = await createTestDb();
  const sql: Sql = { ...db.sql, query: (s: Statement) => ((statements += 1), db.sql.query(s)) } as Sql;
  skiplock = createSkiplock({ sql, tasks: exampleTasks, log: () => {} });
  runner = await startNodeRunner({ skiplock, apiToken: 'node-wake-token', port: 0 });
});
afterAll(async () => {
  await runner?.stop();
  await db?.drop();
});

async function done(id: string, timeoutMs = 10_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const [r] = await db.sql.query(statement(`SELECT status, run_at, created_at, started_at FROM skiplock.job WHERE id = $1`, [id]));
    if (r!.status === 'DONE' || Date.now() > deadline) return r!;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

const ms = (a: unknown, b: unknown) => (a as Date).getTime() - (b as Date).getTime();
const percentile = (values: number[], p: number) => [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.ceil(p * values.length) - 1)]!;

test("an enqueue from your own code starts at once (the runner's loop is woken)", async () => {
  const starts: number[] = [];
  for (let i = 0; i < 50; i += 1) {
    const job = await skiplock.enqueue({ task: 'echo', payload: { message: `n${i}` } });
    const r = await done(job.id);
    expect(r.status).toBe('DONE');
    starts.push(ms(r.started_at, r.created_at));
  }
  console.log(`Node runner, enqueue → start: p50 ${percentile(starts, 0.5)} ms, p99 ${percentile(starts, 0.99)} ms (n=${starts.length})`);
  expect(percentile(starts, 0.5)).toBeLessThan(100);
});

test('a delayed job starts at its runAt', async () => {
  const job = await skiplock.enqueue({ task: 'echo', payload: { message: 'later' }, delayMs: 1_500 });
  const r = await done(job.id);
  console.log(`Node runner, delayed job start − runAt: ${ms(r.started_at, r.run_at)} ms`);
  expect(ms(r.started_at, r.run_at)).toBeGreaterThanOrEqual(0);
  expect(ms(r.started_at, r.run_at)).toBeLessThan(1_000);
});

test('idle: no statement for seconds (it sleeps until the next due instant or the safety check)', async () => {
  await new Promise((resolve) => setTimeout(resolve, 300));
  const before = statements;
  await new Promise((resolve) => setTimeout(resolve, 3_000));
  expect(statements - before).toBe(0);
});
