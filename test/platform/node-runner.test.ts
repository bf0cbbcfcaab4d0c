/** The Node runner on a real PostgreSQL: it serves the API, ticks on its own, and shuts down gracefully. */
import { afterAll, beforeAll, expect, test } from 'vitest';
import { startNodeRunner, type NodeRunner } from '../../src/platform/node/runner.ts';
import { createSkiplock, type Skiplock } from '../../src/runtime/skiplock.ts';
import { statement } from '../../src/store/sql.ts';
import { exampleTasks } from '../../src/tasks/examples.ts';
import { createTestDb, type TestDb } from '../support/db.ts';

const TOKEN = 'node-runner-token';
let db: TestDb;
let skiplock: Skiplock;

beforeAll(async () => {
  db = await createTestDb();
  skiplock = createSkiplock({ sql: db.sql, tasks: exampleTasks, log: () => {} });
});
afterAll(() => db.drop());

const start = (drainMs: number) => startNodeRunner({ skiplock, apiToken: TOKEN, port: 0, drainMs, tick: { pollIntervalMs: 50 }, intervalMs: 100 });

const enqueue = (runner: NodeRunner, body: unknown) =>
  fetch(`${runner.url}/v1/jobs`, { method: 'POST', headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' }, body: JSON.stringify(body) })
    .then(async (r) => ((await r.json()) as { job: { id: string } }).job.id);

async function row(id: string) {
  const [r] = await db.sql.query(statement(`SELECT status, attempts, locked_by, last_error, result FROM skiplock.job WHERE id = $1`, [id]));
  return r!;
}

async function until(check: () => Promise<boolean>, timeoutMs = 5_000) {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

test('serves the API and ticks by itself: a job enqueued over HTTP runs; a delayed one runs when due', async () => {
  const runner = await start(1_000);
  try {
    expect((await fetch(`${runner.url}/healthz`)).status).toBe(200);
    const now = await enqueue(runner, { task: 'echo', payload: { message: 'node' } });
    const later = await enqueue(runner, { task: 'echo', payload: { message: 'later' }, delayMs: 300 });
    await until(async () => (await row(now)).status === 'DONE' && (await row(later)).status === 'DONE');
    expect(await row(later)).toMatchObject({ attempts: 1, result: { message: 'later' } });
  } finally {
    await runner.stop();
  }
});

test('graceful shutdown: stops claiming, lets running jobs finish within drainMs, releases the rest', async () => {
  const runner = await start(400);
  const short = await enqueue(runner, { task: 'sleep', payload: { ms: 150 } });
  const long = await enqueue(runner, { task: 'sleep', payload: { ms: 15_000 } });
  await until(async () => (await row(short)).status === 'RUNNING' && (await row(long)).status === 'RUNNING');

  const stopping = Date.now();
  await runner.stop();
  const tookMs = Date.now() - stopping;
  // Queued after stop() began: nobody may claim it any more.
  await db.sql.query(statement(`INSERT INTO skiplock.job (task, payload) VALUES ('echo', '{"message":"after"}')`));

  expect(await row(short)).toMatchObject({ status: 'DONE', attempts: 1 });
  // Released: back in the queue, unlocked, the attempt not spent.
  expect(await row(long)).toMatchObject({ status: 'QUEUED', attempts: 0, locked_by: null, last_error: expect.stringContaining('shut down') });
  // drainMs + marginMs is 1.4 s; the bound only has to be well under the long job's 15 s to show that
  // stop() did not wait for it (a tight one would depend on an unloaded machine).
  expect(tookMs).toBeLessThan(8_000);
  await new Promise((resolve) => setTimeout(resolve, 300));
  const [{ n } = { n: -1 }] = await db.sql.query<{ n: number }>(statement(`SELECT count(*)::int AS n FROM skiplock.job WHERE status <> 'QUEUED' AND payload->>'message' = 'after'`));
  expect(n).toBe(0);
});
