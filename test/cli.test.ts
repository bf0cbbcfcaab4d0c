/**
 * The CLI as a user runs it: a child process on DATABASE_URL, JSON out, exit codes. This
 * repository's CLI (src/app/cli.ts: the package's CLI with the example tasks); the package's own
 * (src/cli.ts, the `skiplock` bin) registers no tasks by itself.
 */
import { seeded } from './support/seed.ts';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { statement } from '../src/store/sql.ts';
import { runFile, type CliRun } from './support/cli-run.ts';
import { createTestDb, type TestDb } from './support/db.ts';

const CLI = fileURLToPath(new URL('../src/app/cli.ts', import.meta.url));
const PACKAGE_CLI = fileURLToPath(new URL('../src/cli.ts', import.meta.url));
const FIXTURE_TASKS = fileURLToPath(new URL('./fixtures/cli-tasks.ts', import.meta.url));

let db: TestDb;
beforeAll(async () => (db = await createTestDb({ migrated: false })));
afterAll(() => db.drop());

type Run = CliRun;

function cli(args: string[], env: Record<string, string | undefined> = { DATABASE_URL: db.url }, script = CLI): Promise<Run> {
  const childEnv = { ...process.env, ...env };
  if (env.DATABASE_URL === undefined) delete childEnv.DATABASE_URL;
  return runFile(process.execPath, ['--experimental-strip-types', '--disable-warning=ExperimentalWarning', script, ...args], { env: childEnv });
}

test('migrate applies the migrations once', async () => {
  const first = await cli(['migrate']);
  expect(first.code, first.stderr).toBe(0);
  expect(first.json.applied).toContain(1);
  const again = await cli(['migrate']);
  expect(again.json).toMatchObject({ applied: [], alreadyApplied: expect.arrayContaining([1]) });
});

test('enqueue, with an idempotency key, and its refusals', async () => {
  const job = await cli(['enqueue', 'echo', '{"message":"from the cli"}', '--priority', '2', '--idempotency-key', 'deploy-42']);
  expect(job.code, job.stderr).toBe(0);
  expect(job.json).toMatchObject({ created: true, job: { task: 'echo', payload: { message: 'from the cli' }, priority: 2, status: 'QUEUED' } });
  const replay = await cli(['enqueue', 'echo', '{"message":"again"}', '--idempotency-key', 'deploy-42']);
  expect(replay.json).toMatchObject({ created: false, job: { id: job.json.job.id } });
  const delayed = await cli(['enqueue', 'poison', '--delay-ms', '3600000']);
  expect(delayed.json.job.status).toBe('QUEUED');

  const refusals: [string[], string][] = [
    [['enqueue', 'nope'], 'unknown_task'],
    [['enqueue', 'echo', '{"message":'], 'invalid_json'],
    [['enqueue', 'echo', '{"message":1}'], 'invalid_payload'],
    [['enqueue', 'echo', '{"message":"x"}', '--run-at', 'tomorrow'], 'invalid_request'],
  ];
  for (const [args, code] of refusals) {
    const run = await cli(args);
    expect(run.code, args.join(' ')).toBe(1);
    expect(run.json).toMatchObject({ error: { code } });
  }
  // Without --tasks, an unknown task says how to register yours.
  expect((await cli(['enqueue', 'add'])).json.error.message).toMatch(/unknown task "add": no --tasks given; pass --tasks <module>/);
});

test('jobs lists newest first with filters and a cursor; tick runs them', async () => {
  const all = await cli(['jobs']);
  expect(all.json.jobs.map((j: any) => j.task)).toEqual(['poison', 'echo']);
  const first = await cli(['jobs', '--limit', '1']);
  expect(first.json.jobs).toHaveLength(1);
  const second = await cli(['jobs', '--limit', '1', '--cursor', first.json.nextCursor]);
  expect(second.json).toMatchObject({ jobs: [{ task: 'echo' }], nextCursor: null });

  const tick = await cli(['tick', '--budget', '20000']);
  expect(tick.code, tick.stderr).toBe(0);
  expect(tick.json).toMatchObject({ claimed: 1, done: 1 });
  const done = await cli(['jobs', '--status', 'done']);
  expect(done.json.jobs).toMatchObject([{ task: 'echo', status: 'DONE', result: { message: 'from the cli' } }]);
  // One rule with the HTTP API (?status=done): any case.
  expect((await cli(['jobs', '--status', 'Done'])).json).toEqual(done.json);

  const bad = await cli(['jobs', '--cursor', 'nonsense']);
  expect(bad.code).toBe(1);
  expect(bad.json).toMatchObject({ error: { code: 'invalid_request' } });
});

test('--tasks registers a module of tasks beside the examples', async () => {
  const job = await cli(['enqueue', 'shout', '{"text":"hi"}', '--tasks', FIXTURE_TASKS]);
  expect(job.code, job.stderr).toBe(0);
  const tick = await cli(['tick', '--budget', '20000', '--tasks', FIXTURE_TASKS]);
  expect(tick.json).toMatchObject({ claimed: 1, done: 1 });
  const done = await cli(['jobs', '--task', 'shout']);
  expect(done.json.jobs[0]).toMatchObject({ status: 'DONE', result: { text: 'HI' } });
});

test('tasks, pause, resume; reschedule; a debounced enqueue', async () => {
  const paused = await cli(['pause', 'poison']);
  expect(paused.code, paused.stderr).toBe(0);
  expect(paused.json.task).toMatchObject({ name: 'poison', state: 'paused' });
  const tasks = await cli(['tasks']);
  expect(tasks.json.tasks.find((t: any) => t.name === 'poison')).toMatchObject({ state: 'paused', counts: { QUEUED: 1 } });
  const queued = (await cli(['jobs', '--task', 'poison', '--status', 'queued'])).json.jobs[0];
  const now = await cli(['reschedule', queued.id, '--delay-ms', '0', '--priority', '4']);
  expect(now.code, now.stderr).toBe(0);
  expect(now.json.job).toMatchObject({ id: queued.id, priority: 4 });
  expect((await cli(['tick', '--budget', '20000'])).json).toMatchObject({ claimed: 0 });
  expect((await cli(['resume', 'poison'])).json.task).toMatchObject({ state: 'active', pausedAt: null });
  expect((await cli(['tick', '--budget', '20000'])).json).toMatchObject({ claimed: 1 });
  expect((await cli(['reschedule', queued.id, '--delay-ms', '0'])).json).toMatchObject({ error: { code: 'conflict' } });
  const a = await cli(['enqueue', 'echo', '{"message":"a"}', '--debounce-key', 'k', '--debounce-ms', '60000']);
  const b = await cli(['enqueue', 'echo', '{"message":"b"}', '--debounce-key', 'k', '--debounce-ms', '60000', '--debounce-keep', 'first']);
  expect(a.json.created).toBe(true);
  expect(b.json).toMatchObject({ created: false, job: { id: a.json.job.id, payload: { message: 'a' } } });
  expect((await cli(['pause'])).code).toBe(2);
  expect((await cli(['enqueue', 'echo', '--debounce-key', 'k'])).code).toBe(2);
});

test('jobs --status waiting lists WAITING parents (durable steps); the help names every status', async () => {
  const [row] = await db.sql.query(statement(
    `${seeded(`INSERT INTO skiplock.job_record (task, payload, status, attempts, pending_children) VALUES ('echo', '{"message":"parent"}', 'WAITING', 1, 2)`, 'id::text AS id')}`,
  ));
  for (const status of ['waiting', 'WAITING']) {
    const waiting = await cli(['jobs', '--status', status]);
    expect(waiting.code, waiting.stderr).toBe(0);
    expect(waiting.json.jobs).toMatchObject([{ id: row!.id, status: 'WAITING', pendingChildren: 2 }]);
  }
  const help = await cli(['--help']);
  expect(help.stdout).toContain('queued, running, waiting, done, dead, cancelled');
});

test('usage errors exit 2, in one line with a hint (test/cli-ux.test.ts has more); no command prints the usage', async () => {
  for (const args of [['frobnicate'], ['jobs', '--status', 'SOON'], ['jobs', '--limit', 'ten'], ['enqueue'], ['migrate', 'extra'], ['tick', '--bogus']]) {
    const run = await cli(args);
    expect(run.code, args.join(' ')).toBe(2);
    expect(run.stderr.trim(), args.join(' ')).toMatch(/^skiplock: [^\n]+ — try: skiplock help( \w+)?$/);
  }
  const bare = await cli([]);
  expect(bare.code).toBe(2);
  expect(bare.stderr).toContain('usage: skiplock');
  const noUrl = await cli(['jobs'], { DATABASE_URL: undefined });
  expect(noUrl.code).toBe(2);
  expect(noUrl.stderr).toContain('DATABASE_URL');
  const help = await cli(['--help']);
  expect(help.code).toBe(0);
});

test('a bad DATABASE_URL: one line naming it and what is wrong, no stack trace, no password', async () => {
  const malformed = await cli(['jobs'], { DATABASE_URL: 'notaurl' });
  expect(malformed.code).toBe(2);
  expect(malformed.stderr.trim()).toBe('skiplock: DATABASE_URL is not a PostgreSQL URL (postgres://user:password@host:port/database): got "notaurl"');

  const refused = new URL(db.url);
  refused.port = '1';
  const unreachable = await cli(['jobs'], { DATABASE_URL: refused.toString() });
  expect(unreachable.code).toBe(1);
  expect(unreachable.stderr.trim()).toBe('skiplock: DATABASE_URL: cannot connect to PostgreSQL at 127.0.0.1:1 (connection refused)');

  const wrong = new URL(db.url);
  wrong.password = 'not-it';
  const denied = await cli(['migrate'], { DATABASE_URL: wrong.toString() });
  expect(denied.code).toBe(1);
  expect(denied.stderr.trim()).toMatch(/^skiplock: DATABASE_URL: PostgreSQL at 127\.0\.0\.1:\d+ refused the login: password authentication failed for user "postgres"$/);
  expect(denied.stderr).not.toContain('not-it');
});

test('sslmode=require (as Neon writes it) prints no SECURITY WARNING; a server without TLS is one clear line', async () => {
  const neonStyle = new URL(db.url);
  neonStyle.search = '?sslmode=require&channel_binding=require';
  const run = await cli(['jobs'], { DATABASE_URL: neonStyle.toString() });
  expect(run.stderr).not.toContain('SECURITY WARNING');
  expect(run.code).toBe(1);
  expect(run.stderr.trim()).toMatch(/^skiplock: DATABASE_URL: cannot connect to PostgreSQL at 127\.0\.0\.1:\d+ \(the server does not support SSL; remove sslmode from the URL for a local server\)$/);
});

test('the package CLI knows no task until --tasks names a module', async () => {
  const unknown = await cli(['enqueue', 'echo', '{"message":"x"}'], undefined, PACKAGE_CLI);
  expect(unknown.code).toBe(1);
  expect(unknown.json).toMatchObject({ error: { code: 'unknown_task' } });
  const own = await cli(['enqueue', 'shout', '{"text":"pkg"}', '--tasks', FIXTURE_TASKS], undefined, PACKAGE_CLI);
  expect(own.code, own.stderr).toBe(0);
  expect(own.json).toMatchObject({ created: true, job: { task: 'shout' } });
  const migrate = await cli(['migrate'], undefined, PACKAGE_CLI);
  expect(migrate.json).toMatchObject({ applied: [] });
});

test('events send and list; a bad name is refused', async () => {
  const sent = await cli(['events', 'send', 'order.paid', '{"amount":3}', '--key', 'o-cli', '--idempotency-key', 'cli-1']);
  expect(sent.code).toBe(0);
  expect(sent.json).toMatchObject({ created: true, event: { woken: 0, started: 0, cancelled: 0 } });
  const again = await cli(['events', 'send', 'order.paid', '--key', 'o-cli', '--idempotency-key', 'cli-1']);
  expect(again.json).toMatchObject({ created: false, event: { id: (sent.json as { event: { id: string } }).event.id } });
  const listed = await cli(['events', 'list', '--key', 'o-cli']);
  expect(listed.json).toMatchObject({ events: [{ name: 'order.paid', key: 'o-cli', data: { amount: 3 } }], nextCursor: null });
  const bad = await cli(['events', 'send', 'bad name']);
  expect(bad.code).toBe(1);
  expect(bad.json).toMatchObject({ error: { code: 'invalid_request' } });
  expect((await cli(['events', 'send'])).code).toBe(2);
});

test('events send without --tasks: the on: job is left pending, said on stderr, and started once by the deployment that defines the task', async () => {
  expect((await cli(['migrate'], undefined, PACKAGE_CLI)).code).toBe(0);
  const { createSkiplock, defineTask } = await import('../src/index.ts');
  const { z } = await import('zod');
  const handled: string[] = [];
  const welcome = defineTask({ name: 'cli-welcome', payload: z.object({ userId: z.string() }), on: 'cli.user.created', timeoutMs: 2_000, handler: (p) => void handled.push(p.userId) });
  const deployment = createSkiplock({ sql: db.sql, tasks: [welcome], log: () => {}, retention: false });
  await deployment.tick({ untilIdle: true, budgetMs: 5_000, pollIntervalMs: 10 }); // registers its tasks
  const sent = await cli(['events', 'send', 'cli.user.created', '{"userId":"c1"}'], undefined, PACKAGE_CLI);
  expect(sent.code, sent.stderr).toBe(0);
  expect(sent.json).toMatchObject({ created: true, event: { started: 0, pending: 1 } });
  expect(sent.stderr).toMatch(/1 on: job .*pending.*deployment/);
  await deployment.tick({ untilIdle: true, budgetMs: 5_000, pollIntervalMs: 10 });
  await deployment.tick({ untilIdle: true, budgetMs: 5_000, pollIntervalMs: 10 });
  expect(handled).toEqual(['c1']);
  const [row] = await db.sql.query(statement(`SELECT started, pending FROM skiplock.event WHERE id = $1`, [sent.json.event.id]));
  expect(row).toEqual({ started: 1, pending: 0 });
});
