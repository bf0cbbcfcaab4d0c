/**
 * The CLI wakes the deployment it writes for (SKIPLOCK_URL or --url, with API_TOKEN): its writes
 * start their jobs on an idle Node runner that never checks by itself (idleCheckMs 0). Without
 * them, one line on stderr says when the deployment finds the work and how to wake it.
 */
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { startNodeRunner, type NodeRunner } from '../src/platform/node/runner.ts';
import { createSkiplock, type Skiplock } from '../src/runtime/skiplock.ts';
import { statement } from '../src/store/sql.ts';
import { exampleTasks } from '../src/tasks/examples.ts';
import { runFile, type CliRun } from './support/cli-run.ts';
import { createTestDb, type TestDb } from './support/db.ts';

const CLI = fileURLToPath(new URL('../src/app/cli.ts', import.meta.url));
const TOKEN = 'cli-wake-test-token-0123';
let db: TestDb;
let runner: NodeRunner;
let own: Skiplock<typeof exampleTasks>;
let hits = 0;

beforeAll(async () => {
  db = await createTestDb();
  own = createSkiplock({ sql: db.sql, tasks: exampleTasks, idleCheckMs: 0, log: () => {} });
  const counted: Skiplock = { ...own, wake: (at) => ((hits += 1), own.wake(at)) };
  runner = await startNodeRunner({ skiplock: counted, apiToken: TOKEN, port: 0, log: () => {} });
  await new Promise((resolve) => setTimeout(resolve, 300));
});
afterAll(async () => {
  await runner?.stop();
  await db?.drop();
});

function cli(args: string[], env: Record<string, string | undefined> = {}): Promise<CliRun> {
  const childEnv: NodeJS.ProcessEnv = { ...process.env, DATABASE_URL: db.url, SKIPLOCK_URL: undefined, API_TOKEN: undefined, ...env };
  for (const [k, v] of Object.entries(childEnv)) if (v === undefined) delete childEnv[k];
  return runFile(process.execPath, ['--experimental-strip-types', '--disable-warning=ExperimentalWarning', CLI, ...args], { env: childEnv });
}
const wakeEnv = () => ({ SKIPLOCK_URL: runner.url, API_TOKEN: TOKEN });

async function status(id: string) {
  const [r] = await db.sql.query(statement(`SELECT status FROM skiplock.job WHERE id = $1`, [id]));
  return r!.status as string;
}
async function until(id: string, wanted: string, timeoutMs = 8_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const s = await status(id);
    if (s === wanted || Date.now() > deadline) return s;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

test('without SKIPLOCK_URL: the job waits on an idle deployment, and one line says until when and how to wake it', async () => {
  const run = await cli(['enqueue', 'echo', '{"message":"unheard"}']);
  expect(run.code, run.stderr).toBe(0);
  const lines = run.stderr.trim().split('\n');
  expect(lines).toHaveLength(1);
  expect(lines[0]).toMatch(/^skiplock: the work is due now, but an idle deployment finds it only at its next safety check \(IDLE_CHECK_MS.*set SKIPLOCK_URL .* and API_TOKEN .*POST \/v1\/wake/);
  await new Promise((resolve) => setTimeout(resolve, 800));
  expect(await status(run.json.job.id)).toBe('QUEUED');
  // A delayed one says its instant; a read says nothing.
  const later = await cli(['enqueue', 'echo', '{"message":"later"}', '--delay-ms', '3600000']);
  expect(later.stderr).toMatch(/the work is due at \d{4}-\d\d-\d\dT/);
  const read = await cli(['jobs', '--limit', '1']);
  expect(read.code, read.stderr).toBe(0);
  expect(read.stderr).toBe('');
  await own.wake();
  expect(await until(run.json.job.id, 'DONE')).toBe('DONE');
});

test('with SKIPLOCK_URL and API_TOKEN: enqueue, retry, restart, jobs retry and events send each start their job on the idle runner', async () => {
  let before = hits;
  const enqueued = await cli(['enqueue', 'echo', '{"message":"heard"}'], wakeEnv());
  expect(enqueued.code, enqueued.stderr).toBe(0);
  expect(enqueued.stderr).toBe('');
  expect(hits).toBe(before + 1);
  expect(await until(enqueued.json.job.id, 'DONE')).toBe('DONE');

  // retry and restart of a cancelled job, the bulk retry of a filter: each made due now.
  for (const args of [['retry'], ['restart'], ['jobs', 'retry'], ['jobs', 'restart']]) {
    const job = await own.enqueue({ task: 'echo', payload: { message: args.join(' ') }, delayMs: 3_600_000 });
    await own.cancelJob(job.id);
    before = hits;
    const run = await cli([...args, job.id], wakeEnv());
    expect(run.code, `${args.join(' ')}: ${run.stderr}`).toBe(0);
    expect(hits, args.join(' ')).toBe(before + 1);
    expect(await until(job.id, 'DONE'), args.join(' ')).toBe('DONE');
  }
  const dead = await own.enqueue({ task: 'echo', payload: { message: 'bulk' }, delayMs: 3_600_000 });
  await own.cancelJob(dead.id);
  const bulk = await cli(['jobs', 'retry', '--task', 'echo', '--status', 'cancelled', '--url', runner.url], { API_TOKEN: TOKEN });
  expect(bulk.code, bulk.stderr).toBe(0);
  expect(bulk.json.changed).toBeGreaterThanOrEqual(1);
  expect(await until(dead.id, 'DONE')).toBe('DONE');

  // events send: the waiting job resumes.
  const waiting = await own.enqueue({ task: 'await-payment', payload: { orderId: 'cli-order', timeoutMs: 3_600_000 } });
  const deadline = Date.now() + 8_000;
  for (;;) {
    const [r] = await db.sql.query(statement(`SELECT started_at FROM skiplock.job WHERE id = $1`, [waiting.id]));
    if (r!.started_at !== null || Date.now() > deadline) break;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  await new Promise((resolve) => setTimeout(resolve, 300));
  const sent = await cli(['events', 'send', 'order.paid', '{"amount":1}', '--key', 'cli-order'], wakeEnv());
  expect(sent.code, sent.stderr).toBe(0);
  expect(sent.json.event.woken).toBe(1);
  expect(await until(waiting.id, 'DONE')).toBe('DONE');
});

test('a deployment that is down: the write succeeds, and one line says the wake failed', async () => {
  const run = await cli(['enqueue', 'echo', '{"message":"down"}'], { SKIPLOCK_URL: 'http://127.0.0.1:9/skiplock', API_TOKEN: TOKEN });
  expect(run.code, run.stderr).toBe(0);
  expect(run.json.created).toBe(true);
  expect(run.stderr.trim()).toMatch(/^skiplock: waking the deployment at http:\/\/127\.0\.0\.1:9\/skiplock\/v1\/wake failed \(.+\); it finds the work at its next safety check/);
  await own.cancelJob(run.json.job.id);
});

test('SKIPLOCK_URL without API_TOKEN, or not a URL, is a mistake said before anything is written', async () => {
  const noToken = await cli(['enqueue', 'echo', '{"message":"x"}'], { SKIPLOCK_URL: runner.url });
  expect(noToken.code).toBe(2);
  expect(noToken.stderr).toMatch(/^skiplock: SKIPLOCK_URL is set but API_TOKEN is not/);
  const badUrl = await cli(['enqueue', 'echo', '{"message":"x"}', '--url', 'localhost:8787'], { API_TOKEN: TOKEN });
  expect(badUrl.code).toBe(2);
  expect(badUrl.stderr).toMatch(/^skiplock: --url must be the deployment's http\(s\) base URL/);
  const shortToken = await cli(['enqueue', 'echo', '{"message":"x"}'], { SKIPLOCK_URL: runner.url, API_TOKEN: 'short' });
  expect(shortToken.code).toBe(2);
  expect(shortToken.stderr).toMatch(/^skiplock: API_TOKEN is too short/);
});
