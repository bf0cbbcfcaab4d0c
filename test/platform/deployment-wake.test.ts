/**
 * Writers outside the deployment (`createSkiplock({ deployment: { url, token } })`): a second
 * instance on the same database wakes an idle Node runner that never checks by itself
 * (idleCheckMs 0): an enqueue, a delayed enqueue, a retryJob and a sendEvent each start their job
 * through the runner's POST /v1/wake; a burst costs at most two requests; a deployment that is down
 * or does not answer fails no write and holds it no longer than the bound.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { startNodeRunner, type NodeRunner } from '../../src/platform/node/runner.ts';
import { createSkiplock, type Skiplock } from '../../src/runtime/skiplock.ts';
import { statement } from '../../src/store/sql.ts';
import { exampleTasks } from '../../src/tasks/examples.ts';
import { createTestDb, type TestDb } from '../support/db.ts';
import { jobRow, untilStatus } from '../support/job-rows.ts';

const TOKEN = 'deployment-wake-test-token';
let db: TestDb;
let runner: NodeRunner;
let outside: Skiplock<typeof exampleTasks>;
/** Every POST /v1/wake the runner answered: its `at` (undefined: now). */
const hits: (Date | undefined)[] = [];
const hitTimes: number[] = [];
const warnings: { message: string; fields?: Record<string, unknown> }[] = [];

beforeAll(async () => {
  db = await createTestDb();
  const own = createSkiplock({ sql: db.sql, tasks: exampleTasks, idleCheckMs: 0, log: () => {} });
  const counted: Skiplock = { ...own, wake: (at) => (hits.push(at), hitTimes.push(Date.now()), own.wake(at)) };
  runner = await startNodeRunner({ skiplock: counted, apiToken: TOKEN, port: 0, log: () => {} });
  outside = createSkiplock({
    sql: db.sql,
    tasks: exampleTasks,
    deployment: { url: runner.url, token: TOKEN },
    log: (level, message, fields) => void (level === 'warn' && warnings.push({ message, ...(fields && { fields }) })),
  });
  await idle();
});
afterAll(async () => {
  await runner?.stop();
  await db?.drop();
});

/** The runner's start-up tick is over. */
const idle = () => new Promise((resolve) => setTimeout(resolve, 300));

const row = (id: string) => jobRow(db.sql, id);
const until = (id: string, status: string, timeoutMs = 8_000) => untilStatus(db.sql, id, status, timeoutMs);

test('the defect without the option: another instance’s enqueue stays QUEUED on an idle runner', async () => {
  const plain = createSkiplock({ sql: db.sql, tasks: exampleTasks, log: () => {} });
  const before = hits.length;
  const job = await plain.enqueue({ task: 'echo', payload: { message: 'unheard' } });
  await new Promise((resolve) => setTimeout(resolve, 1_000));
  expect((await row(job.id)).status).toBe('QUEUED');
  expect(hits.length).toBe(before);
  // What the CLI and a person do: one wake, and it runs.
  await outside.wake();
  expect((await until(job.id, 'DONE')).status).toBe('DONE');
});

test('an enqueue from the outside instance starts on the idle runner', async () => {
  await idle();
  const before = hits.length;
  const job = await outside.enqueue({ task: 'echo', payload: { message: 'heard' } });
  // The enqueue waited for its wake request: the runner has it already.
  expect(hits.length).toBe(before + 1);
  expect(hits.at(-1)).toBeUndefined();
  expect((await until(job.id, 'DONE')).status).toBe('DONE');
});

test('a delayed enqueue wakes the runner at its runAt', async () => {
  await idle();
  const before = hits.length;
  const runAt = new Date(Date.now() + 2_000);
  const job = await outside.enqueue({ task: 'echo', payload: { message: 'later' }, runAt });
  expect(hits.length).toBe(before + 1);
  expect(hits.at(-1)?.getTime()).toBe(runAt.getTime());
  const r = await until(job.id, 'DONE');
  expect(r.status).toBe('DONE');
  console.log(`outside delayed enqueue, start − runAt: ${(r.started_at as Date).getTime() - (r.run_at as Date).getTime()} ms`);
  // A later instant than one sent and not passed sends nothing.
  const first = await outside.enqueue({ task: 'echo', payload: { message: 'in a minute' }, delayMs: 60_000 });
  const count = hits.length;
  await outside.enqueue({ task: 'echo', payload: { message: 'in two minutes' }, delayMs: 120_000 });
  expect(hits.length).toBe(count);
  await outside.cancelJob(first.id);
});

test('retryJob from the outside instance starts the job on the idle runner', async () => {
  await idle();
  const job = await outside.enqueue({ task: 'echo', payload: { message: 'retried' }, delayMs: 3_600_000 });
  await outside.cancelJob(job.id);
  const before = hits.length;
  await outside.retryJob(job.id);
  expect(hits.length).toBe(before + 1);
  expect((await until(job.id, 'DONE')).status).toBe('DONE');
});

test('sendEvent from the outside instance resumes the waiting job on the idle runner', async () => {
  await idle();
  const job = await outside.enqueue({ task: 'await-payment', payload: { orderId: 'o-outside', timeoutMs: 3_600_000 } });
  // Waiting for its event: QUEUED again, due at the wait's timeout, once its first run reached the wait.
  const deadline = Date.now() + 8_000;
  while ((await row(job.id)).started_at === null && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
  expect((await row(job.id)).started_at).not.toBeNull();
  await idle();
  const before = hits.length;
  const sent = await outside.sendEvent({ name: 'order.paid', key: 'o-outside', data: { amount: 1 } });
  expect(sent.woken).toBe(1);
  expect(hits.length).toBe(before + 1);
  expect((await until(job.id, 'DONE')).status).toBe('DONE');
});

test('a burst of 50 enqueues sends at most two wake requests, and every job runs', async () => {
  await new Promise((resolve) => setTimeout(resolve, 500)); // past the coalescing window of the last test
  const before = hits.length;
  const t0 = Date.now();
  const jobs = await Promise.all(Array.from({ length: 50 }, (_, i) => outside.enqueue({ task: 'echo', payload: { message: `burst ${i}` } })));
  const tDone = Date.now();
  await new Promise((resolve) => setTimeout(resolve, 600)); // the trailing request, if any
  const requests = hits.length - before;
  console.log('burst hits at', hitTimes.slice(before).map((t) => t - t0), 'enqueues done at', tDone - t0);
  console.log(`burst of 50 concurrent enqueues: ${requests} wake request(s)`);
  expect(requests).toBeGreaterThanOrEqual(1);
  expect(requests).toBeLessThanOrEqual(2);
  for (const job of jobs) expect((await until(job.id, 'DONE')).status).toBe('DONE');
  // One after another, as a script's loop: the first waits for its request, the rest share one.
  await new Promise((resolve) => setTimeout(resolve, 500));
  const beforeLoop = hits.length;
  const looped = [];
  for (let i = 0; i < 50; i += 1) looped.push(await outside.enqueue({ task: 'echo', payload: { message: `loop ${i}` } }));
  await new Promise((resolve) => setTimeout(resolve, 600));
  console.log(`burst of 50 sequential enqueues: ${hits.length - beforeLoop} wake request(s)`);
  expect(hits.length - beforeLoop).toBeLessThanOrEqual(2);
  for (const job of looped) expect((await until(job.id, 'DONE')).status).toBe('DONE');
  // One batch: one request.
  await new Promise((resolve) => setTimeout(resolve, 500));
  const beforeBatch = hits.length;
  const batch = await outside.enqueueBatch(Array.from({ length: 20 }, (_, i) => ({ task: 'echo' as const, payload: { message: `batch ${i}` } })));
  expect(hits.length - beforeBatch).toBe(1);
  for (const { job } of batch) expect((await until(job.id, 'DONE')).status).toBe('DONE');
});

test('a deployment that is down, or does not answer, fails no write and holds it no longer than the bound', async () => {
  // Down: a port nothing listens on.
  const closed = createServer();
  await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
  const downPort = (closed.address() as AddressInfo).port;
  await new Promise((resolve) => closed.close(resolve));
  const logged: string[] = [];
  const log = (level: string, message: string, fields?: Record<string, unknown>) => void (level === 'warn' && logged.push(`${message} ${JSON.stringify(fields)}`));
  const down = createSkiplock({ sql: db.sql, tasks: exampleTasks, deployment: { url: `http://127.0.0.1:${downPort}/skiplock`, token: TOKEN }, log });
  const job = await down.enqueue({ task: 'echo', payload: { message: 'deployment down' }, delayMs: 3_600_000 });
  expect(job.status).toBe('QUEUED');
  expect(logged.join('\n')).toMatch(/waking the deployment failed; it finds the work at its next safety check/);
  expect(logged.join('\n')).toContain(`http://127.0.0.1:${downPort}/skiplock/v1/wake`);

  // Hanging: accepts the request and never answers. The write returns at the bound, the request still open.
  const open: import('node:http').ServerResponse[] = [];
  const hanging: Server = createServer((_req, res) => void open.push(res));
  await new Promise<void>((resolve) => hanging.listen(0, '127.0.0.1', resolve));
  try {
    const slow = createSkiplock({
      sql: db.sql,
      tasks: exampleTasks,
      deployment: { url: `http://127.0.0.1:${(hanging.address() as AddressInfo).port}`, token: TOKEN, timeoutMs: 200 },
      log,
    });
    logged.length = 0;
    const held = await slow.enqueue({ task: 'echo', payload: { message: 'deployment hangs' }, delayMs: 3_600_000 });
    expect(held.status).toBe('QUEUED');
    expect(open.length).toBe(1); // the request arrived, and was never answered
    expect(logged.join('\n')).toMatch(/no answer within 200 ms/);
  } finally {
    for (const res of open) res.destroy();
    await new Promise((resolve) => hanging.close(resolve));
  }
});

test('the option is checked at createSkiplock', () => {
  const make = (deployment: unknown) => () => createSkiplock({ sql: db.sql, tasks: exampleTasks, deployment: deployment as never });
  expect(make({ url: 'ftp://x.example', token: TOKEN })).toThrow(/deployment\.url must be the deployment's http\(s\) base URL/);
  expect(make({ url: 'not a url', token: TOKEN })).toThrow(/deployment\.url/);
  expect(make({ url: 'https://x.example', token: 'short' })).toThrow(/deployment\.token is too short \(5 characters, at least 16\)/);
  expect(make({ url: 'https://x.example' })).toThrow(/deployment\.token must be a string/);
  expect(make({ url: 'https://x.example', token: TOKEN, timeoutMs: 0 })).toThrow(/deployment\.timeoutMs/);
  expect(make(null)).toThrow(/deployment must be an object/);
});
