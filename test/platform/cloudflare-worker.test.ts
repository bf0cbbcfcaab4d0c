/**
 * The Worker in the real Workers runtime: one `wrangler dev` (workerd) for the file, reaching a
 * real PostgreSQL through @neondatabase/serverless's HTTP driver and the local Neon proxy, as
 * `npm start` runs it. `scheduled` is fired through wrangler's /__scheduled.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { PROJECT_ROOT, type WranglerDev } from '../../src/dev/wrangler-dev.ts';
import { statement } from '../../src/store/sql.ts';
import type { TestDb } from '../support/db.ts';
import { startWorkerUnderTest, type WorkerUnderTest } from './worker-under-test.ts';

const TOKEN = 'worker-test-token';
const SCHEDULE = 'example-echo-every-minute';

let under: WorkerUnderTest;
let db: TestDb;
let worker: WranglerDev;

beforeAll(async () => {
  under = await startWorkerUnderTest({
    API_TOKEN: TOKEN,
    // Short minute invocations (12 s, enough for echo's 10 s timeout), so tests wait seconds, not a minute.
    TICK_BUDGET_MS: '12000',
    TICK_POLL_INTERVAL_MS: '200',
    // The cron-only ticker (no Durable Object): the Durable Object one is cloudflare-alarm/wake tests'.
    TICKER: 'cron',
  });
  ({ db, worker } = under);
});

afterAll(() => under?.stop());

const api = (path: string, init: RequestInit = {}) =>
  fetch(`${worker.url}${path}`, { ...init, headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json', ...init.headers } });
const scheduled = () => fetch(`${worker.url}/__scheduled?cron=*+*+*+*+*`).then((r) => r.text());
/**
 * A test that waits for a minute invocation to end: in cron mode it waits inside its minute (59 s,
 * worker.ts) for what it knows is due there, the minute's schedule included, then ticks.
 */
const INVOCATION_TEST_TIMEOUT_MS = 90_000;

async function job(id: string) {
  const [row] = await db.sql.query(statement(`SELECT status, attempts, result, run_at, finished_at FROM skiplock.job WHERE id = $1`, [id]));
  return row!;
}

async function waitForStatus(id: string, status: string, timeoutMs = 10_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const row = await job(id);
    if (row.status === status || Date.now() > deadline) return row;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe('the Worker in workerd', () => {
  test('fetch: an enqueue over HTTP runs the job at once (a tick under ctx.waitUntil)', async () => {
    expect((await fetch(`${worker.url}/healthz`)).status).toBe(200);
    const response = await api('/v1/jobs', { method: 'POST', body: JSON.stringify({ task: 'echo', payload: { message: 'from workerd' } }) });
    expect(response.status).toBe(201);
    const { job: created } = (await response.json()) as { job: { id: string } };
    const row = await waitForStatus(created.id, 'DONE', 5_000);
    expect(row).toMatchObject({ status: 'DONE', attempts: 1, result: { message: 'from workerd' } });
  });

  test('fetch: POST /v1/jobs?wait= answers with the finished job; the traceparent header is kept (no @opentelemetry/api in the bundle: its lazy import fails quietly)', async () => {
    const traceparent = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
    const response = await api('/v1/jobs?wait=10', { method: 'POST', headers: { traceparent }, body: JSON.stringify({ task: 'echo', payload: { message: 'waited' } }) });
    expect(response.status).toBe(200);
    const { job } = (await response.json()) as { job: any };
    expect(job).toMatchObject({ status: 'DONE', result: { message: 'waited' }, traceparent });
    expect(job.history).toEqual([expect.objectContaining({ attempt: 1, outcome: 'done', traceparent: null })]);
  });

  test('fetch: jobs with fairness keys (issue 35) are claimed by the fair claim in workerd, over Neon HTTP, and run', async () => {
    const response = await api('/v1/jobs/batch', {
      method: 'POST',
      body: JSON.stringify({ jobs: ['big', 'big', 'big', 'small'].map((fairnessKey, i) => ({ task: 'echo', payload: { message: `fair ${i}` }, fairnessKey })) }),
    });
    expect(response.status).toBe(201);
    const { jobs } = (await response.json()) as { jobs: { id: string; fairnessKey: string }[] };
    expect(jobs.map((j) => j.fairnessKey)).toEqual(['big', 'big', 'big', 'small']);
    for (const created of jobs) expect(await waitForStatus(created.id, 'DONE', 5_000)).toMatchObject({ status: 'DONE', attempts: 1 });
  });

  test('fetch: requests without the token are refused', async () => {
    const response = await fetch(`${worker.url}/v1/jobs`, { method: 'POST', body: '{}' });
    expect(response.status).toBe(401);
  });

  test('scheduled (cron mode): a minute invocation that knows a job is due within its minute waits for it, and starts it within about a second', async () => {
    const [row] = await db.sql.query(
      statement(`INSERT INTO skiplock.job (task, payload, run_at, timeout_ms) VALUES ('echo', '{"message":"later"}', now() + interval '1500 milliseconds', 2000) RETURNING id::text, run_at`),
    );
    const id = String(row!.id);
    // Written behind the Worker's back: it says so (POST /v1/wake), or the safety check would find it.
    expect((await api('/v1/wake', { method: 'POST', body: JSON.stringify({ at: (row!.run_at as Date).toISOString() }) })).status).toBe(202);
    // The invocation waits for the instant, then ticks until idle, then on inside its minute (a
    // filtered run may stop wrangler under it: not this test's concern).
    void scheduled().catch(() => {});
    const done = await waitForStatus(id, 'DONE', 8_000);
    expect(done.status).toBe('DONE');
    const lateMs = (done.finished_at as Date).getTime() - (done.run_at as Date).getTime();
    // Poll interval 200 ms here (1 s in wrangler.toml), so it is usually under 0.5 s. The bound is
    // loose on purpose: without the invocation ticking on, the job would wait for the next minute.
    expect(lateMs).toBeLessThan(5_000);
  });

  test('scheduled: several invocations for the same minute run each cron firing once', async () => {
    // The first tick registered the static example schedule; make this minute's instant due.
    const [updated] = await db.sql.query(
      statement(
        `UPDATE skiplock.schedule SET watermark = date_trunc('minute', now()) - interval '1 second', next_run_at = NULL
          WHERE name = $1 RETURNING date_trunc('minute', now()) AS instant`,
        [SCHEDULE],
      ),
    );
    expect(updated).toBeDefined();
    // Changed behind the Worker's back: it is told so, or its wake state would wait for the safety check.
    expect((await api('/v1/wake', { method: 'POST' })).status).toBe(202);
    await Promise.all(Array.from({ length: 5 }, scheduled)); // each answers when its invocation ends

    const firings = await db.sql.query(
      statement(`SELECT f.scheduled_for, count(j.id)::int AS jobs, bool_and(j.status = 'DONE') AS done
                   FROM skiplock.cron_firing f LEFT JOIN skiplock.job j ON j.schedule_name = f.schedule_name AND j.scheduled_for = f.scheduled_for
                  WHERE f.schedule_name = $1 GROUP BY f.scheduled_for`, [SCHEDULE]),
    );
    // Each firing has exactly one job; the one made due above has run. (A firing of the next
    // minute, when the invocations straddle it, may still be waiting: that is not this test's point.)
    for (const firing of firings) expect(firing).toMatchObject({ jobs: 1 });
    expect(firings.find((f) => (f.scheduled_for as Date).getTime() === (updated!.instant as Date).getTime())).toMatchObject({ jobs: 1, done: true });
  }, INVOCATION_TEST_TIMEOUT_MS);

  test('events: a workflow waiting for an event holds no invocation; POST /v1/events resumes it at once (a tick under ctx.waitUntil)', async () => {
    const response = await api('/v1/jobs', { method: 'POST', body: JSON.stringify({ task: 'await-payment', payload: { orderId: 'o-workerd' } }) });
    expect(response.status).toBe(201);
    const { job: created } = (await response.json()) as { job: { id: string } };
    // Its wait has a timeout (a day): WAITING until then, like a sleep, its step waiting.
    const step = () => db.sql.query(statement(`SELECT status FROM skiplock.job_step WHERE job_id = $1 AND id = 'paid'`, [created.id]));
    for (const deadline = Date.now() + 5_000; (await step()).length === 0 && Date.now() < deadline; ) await new Promise((resolve) => setTimeout(resolve, 50));
    expect(await step()).toEqual([{ status: 'waiting' }]);
    expect(await waitForStatus(created.id, 'WAITING', 5_000)).toMatchObject({ status: 'WAITING', attempts: 0 });
    const sent = await api('/v1/events', { method: 'POST', body: JSON.stringify({ name: 'order.paid', key: 'o-workerd', data: { amount: 9 } }) });
    expect(sent.status).toBe(201);
    const { id, woken } = (await sent.json()) as { id: string; woken: number };
    expect(woken).toBe(1);
    const done = await waitForStatus(created.id, 'DONE', 5_000);
    expect(done).toMatchObject({ status: 'DONE', result: { orderId: 'o-workerd', paid: { data: { amount: 9 }, eventId: id } } });
  });

  test('durable steps: a workflow sleeping 5 s holds no invocation, and the minute invocation resumes it within its poll interval of waking', async () => {
    const response = await api('/v1/jobs', { method: 'POST', body: JSON.stringify({ task: 'signup-workflow', payload: { email: 'ada@example.com', waitMs: 5_000 } }) });
    expect(response.status).toBe(201);
    const { job: created } = (await response.json()) as { job: { id: string } };
    // The enqueue's own tick runs the first step, then the sleep puts the job back: QUEUED, no lease.
    const sleepStep = () => db.sql.query(statement(`SELECT wake_at FROM skiplock.job_step WHERE job_id = $1 AND id = 'wait-a-day'`, [created.id]));
    for (const deadline = Date.now() + 5_000; (await sleepStep()).length === 0 && Date.now() < deadline; ) await new Promise((resolve) => setTimeout(resolve, 50));
    const sleeping = await waitForStatus(created.id, 'QUEUED', 5_000);
    const [sleep] = await sleepStep();
    expect(sleep).toBeDefined();
    const wakeAt = (sleep!.wake_at as Date).getTime();
    expect((sleeping.run_at as Date).getTime()).toBe(wakeAt);
    const [held] = await db.sql.query(statement(`SELECT locked_by, attempts FROM skiplock.job WHERE id = $1`, [created.id]));
    expect(held).toEqual({ locked_by: null, attempts: 0 }); // nothing holds it, and the sleep spent no attempt

    const invocation = scheduled(); // a minute invocation: it knows the wake-up is due within its minute, and waits for it
    const done = await waitForStatus(created.id, 'DONE', 15_000);
    expect(done).toMatchObject({ status: 'DONE', result: { notified: ['crm', 'analytics', 'billing'] } });
    // The first attempt that started after the wake time: within the poll interval (200 ms), with a loose bound for a loaded machine.
    const { job: detail } = (await (await api(`/v1/jobs/${created.id}`)).json()) as { job: { history: { startedAt: string }[] } };
    const starts = detail.history.map((h) => Date.parse(h.startedAt)).filter((t) => t >= wakeAt);
    expect(starts.length).toBeGreaterThan(0);
    expect(Math.min(...starts) - wakeAt).toBeLessThan(2_000);
    const children = await db.sql.query(statement(`SELECT status FROM skiplock.job WHERE parent_id = $1`, [created.id]));
    expect(children.map((c) => c.status)).toEqual(['DONE', 'DONE', 'DONE']);
    await invocation; // it ends at the end of its minute's wait: the file's last test must not stop wrangler under it
  }, INVOCATION_TEST_TIMEOUT_MS);
});

describe('wrangler deploy --dry-run', () => {
  test('bundles the Worker offline', async () => {
    const outdir = await mkdtemp(join(tmpdir(), 'skiplock-bundle-'));
    try {
      const wrangler = join(PROJECT_ROOT, 'node_modules', 'wrangler', 'bin', 'wrangler.js');
      const { stdout } = await promisify(execFile)(process.execPath, [wrangler, 'deploy', '--dry-run', '--outdir', outdir], {
        cwd: PROJECT_ROOT,
        env: { ...process.env, WRANGLER_SEND_METRICS: 'false', WRANGLER_LOG_PATH: outdir },
      });
      const size = (await stat(join(outdir, 'worker.js'))).size;
      console.log(`[bundle] ${/Total Upload: .*/.exec(stdout)?.[0] ?? ''} (worker.js ${Math.round(size / 1024)} KiB)`);
      expect(stdout).toContain('--dry-run: exiting now');
      expect(size).toBeGreaterThan(0);
      // @opentelemetry/api (an optional peer) is not bundled: it is imported lazily, or passed in.
      expect(await readFile(join(outdir, 'worker.js'), 'utf8')).not.toContain('opentelemetry.js.api');
    } finally {
      await rm(outdir, { recursive: true, force: true });
    }
  });
});
