/** The Node runner on a real PostgreSQL: it serves the API, ticks on its own, and shuts down gracefully. */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { freePort } from '../../src/dev/embedded-postgres.ts';
import { DEFAULT_DRAIN_MS, startNodeRunner, type NodeRunner } from '../../src/platform/node/runner.ts';
import { createSkiplock, type Skiplock } from '../../src/runtime/skiplock.ts';
import { statement, type Sql, type Statement } from '../../src/store/sql.ts';
import { exampleSchedules, exampleTasks } from '../../src/tasks/examples.ts';
import { createTestDb, type TestDb } from '../support/db.ts';
import { lines, runEntry, type EntryRun } from '../support/spawn-entry.ts';

const TOKEN = 'node-runner-token';
let db: TestDb;
let skiplock: Skiplock;

beforeAll(async () => {
  db = await createTestDb();
  skiplock = createSkiplock({ sql: db.sql, tasks: exampleTasks, log: () => {} });
});
afterAll(() => db.drop());

const start = (drainMs: number) => startNodeRunner({ skiplock, apiToken: TOKEN, port: 0, drainMs, tick: { pollIntervalMs: 50 }, intervalMs: 100, log: () => {} });

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

test("routes: the project's own routes are answered first, anything they leave (undefined) is skiplock's", async () => {
  const runner = await startNodeRunner({
    skiplock,
    apiToken: TOKEN,
    port: 0,
    log: () => {},
    routes: async (request) => {
      const url = new URL(request.url);
      if (url.pathname === '/hello') return new Response(`hello ${request.method}`);
      if (url.pathname === '/signup' && request.method === 'POST') return Response.json({ id: (await skiplock.enqueue({ task: 'echo', payload: { message: await request.text() } })).id });
      return undefined;
    },
  });
  try {
    expect(await (await fetch(`${runner.url}/hello`)).text()).toBe('hello GET');
    const { id } = (await (await fetch(`${runner.url}/signup`, { method: 'POST', body: 'mine' })).json()) as { id: string };
    await until(async () => (await row(id)).status === 'DONE');
    expect((await row(id)).result).toEqual({ message: 'mine' });
    expect((await fetch(`${runner.url}/healthz`)).status).toBe(200);
    expect((await fetch(`${runner.url}/v1/jobs/${id}`)).status).toBe(401);
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

test('says at start, in one line through its log option, where it listens, what it runs, and how to listen beyond this machine', async () => {
  const said: string[] = [];
  const withSchedules = createSkiplock({ sql: db.sql, tasks: exampleTasks, schedules: exampleSchedules, log: () => {} });
  const runner = await startNodeRunner({ skiplock: withSchedules, apiToken: TOKEN, port: 0, log: (line) => said.push(line) });
  try {
    expect(said).toHaveLength(1);
    const [line] = said as [string];
    expect(line).toContain(`listening on ${runner.url}`);
    // 127.0.0.1 (the default) is unreachable from outside a container: the line says how to open it.
    expect(line).toMatch(/this machine only.*hostname: '0\.0\.0\.0' to startNodeRunner/);
    expect(line).toContain(`tasks: ${[...withSchedules.tasks.keys()].join(', ')}`);
    expect(line).toContain('schedules: example-echo-every-minute');
    expect(line).toContain(`drains running jobs for ${DEFAULT_DRAIN_MS / 1000} s on stop`);
  } finally {
    await runner.stop();
  }
  // On 0.0.0.0 there is nothing to add about reaching it; no schedules are said as none.
  said.length = 0;
  const open = await startNodeRunner({ skiplock, apiToken: TOKEN, port: 0, hostname: '0.0.0.0', drainMs: 2_000, log: (line) => said.push(line) });
  try {
    expect(said).toHaveLength(1);
    expect(said[0]).not.toContain('this machine only');
    expect(said[0]).toMatch(/schedules: none/);
    expect(said[0]).toContain('drains running jobs for 2 s on stop');
  } finally {
    await open.stop();
  }
});

test("the default drain fits docker stop's grace: SIGTERM, then SIGKILL 10 s later, leaves a long job QUEUED (released), not RUNNING", async () => {
  // The default leaves the release (drainMs + abandonAfterMs + one statement) seconds before the
  // shortest common grace (docker stop, 10 s; Kubernetes 30 s; systemd 90 s).
  expect(DEFAULT_DRAIN_MS).toBeLessThanOrEqual(7_500);
  const env: NodeJS.ProcessEnv = { ...process.env, API_TOKEN: TOKEN, DATABASE_URL: db.url, PORT: String(await freePort()), HOST: '127.0.0.1' };
  delete env.DRAIN_MS; // the default
  const child = spawn(process.execPath, ['--experimental-strip-types', '--no-warnings', fileURLToPath(new URL('../../src/app/node.ts', import.meta.url))], {
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  let killer: NodeJS.Timeout | undefined;
  try {
    await until(async () => /listening on http/.test(stdout), 30_000);
    // One start-up line, from the runner: where, what, and the drain.
    expect(lines(stdout).filter((l) => l.includes('listening on'))).toHaveLength(1);
    const url = /listening on (http:\S+?)[\s;,]/.exec(stdout)![1]!;
    const id = await enqueue({ url } as NodeRunner, { task: 'sleep', payload: { ms: 15_000 } });
    await until(async () => (await row(id)).status === 'RUNNING', 10_000);
    const termAt = performance.now();
    child.kill('SIGTERM');
    killer = setTimeout(() => child.kill('SIGKILL'), 10_000); // what docker stop does after its grace
    const { signal } = await exited;
    console.log(`Node runner, default drain: SIGTERM → exit ${Math.round(performance.now() - termAt)} ms (job released)`);
    expect(signal, stdout).toBeNull(); // it exited by itself, before the SIGKILL
    expect(await row(id)).toMatchObject({ status: 'QUEUED', attempts: 0, locked_by: null, last_error: expect.stringContaining('shut down') });
  } finally {
    clearTimeout(killer);
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  }
}, 60_000);

test('a conclusion that keeps failing backs off: the loop does not tick again at once (no spin)', async () => {
  // The statement that says when work is next due fails; everything else works. Before, the wake
  // state stayed "due now" and the loop ticked again at once: hundreds of statements a second.
  let statements = 0;
  let conclusions = 0;
  const own = await createTestDb(); // empty: nothing runs, so every tick ends and concludes
  const failing: Sql = {
    ...own.sql,
    query: (s: Statement) => {
      statements += 1;
      if (s.text.startsWith('SELECT false AS uncomputed')) {
        conclusions += 1;
        return Promise.reject(Object.assign(new Error('canceling statement due to statement timeout'), { code: '57014' }));
      }
      return own.sql.query(s);
    },
  } as Sql;
  const spinning = createSkiplock({ sql: failing, tasks: exampleTasks, log: () => {}, retention: false });
  const runner = await startNodeRunner({ skiplock: spinning, apiToken: TOKEN, port: 0, drainMs: 100, log: () => {} });
  try {
    await new Promise((resolve) => setTimeout(resolve, 3_000));
  } finally {
    await runner.stop();
    await own.drop();
  }
  // 3 s of the back-off's shortest waits (50, 100, 200, 400, 800, 1600 ms …) fit at most 6 tries and the first.
  expect(conclusions).toBeGreaterThan(1);
  expect(conclusions).toBeLessThanOrEqual(8);
  expect(statements).toBeLessThan(60);
}, 20_000);

describe('main.ts with a bad configuration: one line on stderr, no stack trace, exit code 1', () => {
  const main = async (env: Record<string, string | undefined>) =>
    runEntry('src/app/node.ts', [], { API_TOKEN: TOKEN, DATABASE_URL: db.url, PORT: String(await freePort()), HOST: '127.0.0.1', ...env });
  const expectOneLine = (run: EntryRun, pattern: RegExp) => {
    expect(run.code, run.stderr).toBe(1);
    expect(lines(run.stderr), run.stderr).toHaveLength(1);
    expect(run.stderr).toMatch(pattern);
  };

  test('PORT=abc, PORT=80000, DRAIN_MS=-1', async () => {
    expectOneLine(await main({ PORT: 'abc' }), /^\[skiplock\] PORT must be an integer from 1 to 65535, got "abc"$/m);
    expectOneLine(await main({ PORT: '80000' }), /PORT must be an integer from 1 to 65535, got "80000"/);
    expectOneLine(await main({ DRAIN_MS: '-1' }), /DRAIN_MS must be a positive integer, got "-1"/);
  });

  test('DATABASE_URL or API_TOKEN missing', async () => {
    expectOneLine(await main({ DATABASE_URL: undefined }), /DATABASE_URL is not set/);
    expectOneLine(await main({ API_TOKEN: '' }), /API_TOKEN is not set/);
  });

  test('DATABASE_URL malformed, unreachable, refusing the password', async () => {
    expectOneLine(await main({ DATABASE_URL: 'notaurl' }), /DATABASE_URL is not a PostgreSQL URL/);
    const refused = new URL(db.url);
    refused.port = String(await freePort());
    expectOneLine(await main({ DATABASE_URL: refused.toString() }), /DATABASE_URL: cannot connect to PostgreSQL at 127\.0\.0\.1:\d+ \(connection refused\)/);
    const unknownHost = new URL(db.url);
    unknownHost.hostname = 'no-such-host.invalid';
    expectOneLine(await main({ DATABASE_URL: unknownHost.toString() }), /DATABASE_URL: cannot connect to PostgreSQL at no-such-host\.invalid:\d+ \(host not found\)/);
    const wrong = new URL(db.url);
    wrong.password = 'wrong';
    expectOneLine(await main({ DATABASE_URL: wrong.toString() }), /DATABASE_URL: .*password authentication failed for user "postgres"/);
    const noDb = new URL(db.url);
    noDb.pathname = '/no_such_database';
    expectOneLine(await main({ DATABASE_URL: noDb.toString() }), /DATABASE_URL: .*database "no_such_database" does not exist/);
  });
});
