/**
 * Durable steps, as people and programs see them (issue 15): GET /v1/jobs/:id with its steps and
 * children, lists without them, WAITING wherever statuses are listed, and the dashboard's job page.
 * The rows are written here with SQL, as the engine's statements leave them (migration 012).
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { createClient } from '../../src/client/index.ts';
import { CHILD_LIMIT } from '../../src/store/job-detail.ts';
import { statement } from '../../src/store/sql.ts';
import { API_TOKEN, createTestApp, type TestApp } from './helpers.ts';
import { csrfOf, getPage, logIn, postForm } from './dashboard-support.ts';

/** The clock of every statement and page here (injected). */
const NOW = new Date('2026-12-01T12:00:00.000Z');
const at = (offsetMs: number) => new Date(NOW.getTime() + offsetMs).toISOString();
const HOUR = 3_600_000;
const LONG = 'x'.repeat(300);

let t: TestApp;
let cookie: string;
beforeAll(async () => {
  t = await createTestApp({ skiplock: { now: () => NOW } });
  cookie = await logIn(t);
});
afterAll(() => t.close());

async function insertJob(p: { task?: string; status: string; parentId?: string; parentStep?: string; pendingChildren?: number; stepCount?: number; runAt?: string; payload?: unknown; result?: unknown }): Promise<string> {
  const terminal = ['DONE', 'DEAD', 'CANCELLED'].includes(p.status);
  const [row] = await t.db.sql.query(
    statement(
      `INSERT INTO skiplock.job (task, payload, status, run_at, attempts, finished_at, result, parent_id, parent_step, pending_children, step_count, created_at, updated_at)
       VALUES ($1, $2::jsonb, $3, $4::timestamptz, $5, $6::timestamptz, $7::jsonb, $8::bigint, $9, $10, $11, $12::timestamptz, $12::timestamptz) RETURNING id::text AS id`,
      [
        p.task ?? 'echo',
        JSON.stringify(p.payload ?? { message: 'fixture' }),
        p.status,
        p.runAt ?? at(-HOUR),
        terminal || p.status === 'WAITING' ? 1 : 0,
        terminal ? at(-60_000) : null,
        p.result === undefined ? null : JSON.stringify(p.result),
        p.parentId ?? null,
        p.parentStep ?? null,
        p.pendingChildren ?? 0,
        p.stepCount ?? 0,
        at(-2 * HOUR),
      ],
    ),
  );
  return String(row!.id);
}

interface StepRow {
  id: string;
  kind: 'step' | 'sleep' | 'invoke';
  status: string;
  output?: unknown;
  error?: string;
  attempts?: number;
  startedAt?: string;
  durationMs?: number;
  wakeAt?: string;
  childId?: string;
  childTask?: string;
}

async function insertSteps(jobId: string, steps: StepRow[]): Promise<void> {
  await t.db.sql.batch(
    steps.map((s, seq) =>
      statement(
        `INSERT INTO skiplock.job_step (job_id, id, seq, kind, status, output, error, attempts, started_at, finished_at, duration_ms, wake_at, child_id, child_task)
         VALUES ($1::bigint, $2, $3, $4, $5, $6::jsonb, $7, $8, $9::timestamptz, $9::timestamptz + $10 * interval '1 millisecond', $10, $11::timestamptz, $12::bigint, $13)`,
        [jobId, s.id, seq, s.kind, s.status, s.output === undefined ? null : JSON.stringify(s.output), s.error ?? null, s.attempts ?? 0, s.startedAt ?? null, s.durationMs ?? null, s.wakeAt ?? null, s.childId ?? null, s.childTask ?? null],
      ),
    ),
  );
}

/** A signup workflow waiting on two of its three notify children, as the engine leaves it. */
async function waitingWorkflow() {
  const parent = await insertJob({ task: 'signup-workflow', status: 'WAITING', pendingChildren: 2, stepCount: 7, payload: { email: 'ada@example.com' } });
  const crm = await insertJob({ task: 'notify', status: 'DONE', parentId: parent, parentStep: 'notify-crm', result: { service: 'crm' } });
  const analytics = await insertJob({ task: 'notify', status: 'QUEUED', parentId: parent, parentStep: 'notify-analytics' });
  const billing = await insertJob({ task: 'notify', status: 'QUEUED', parentId: parent, parentStep: 'notify-billing' });
  await insertSteps(parent, [
    { id: 'create-account', kind: 'step', status: 'done', output: { userId: 'u-1' }, attempts: 1, startedAt: at(-2 * HOUR), durationMs: 12 },
    { id: 'wait-a-day', kind: 'sleep', status: 'done', wakeAt: at(-HOUR), startedAt: at(-2 * HOUR) },
    { id: 'send-welcome-email', kind: 'step', status: 'done', output: { long: LONG }, attempts: 2, startedAt: at(-HOUR), durationMs: 1500 },
    { id: 'flaky <b>call</b>', kind: 'step', status: 'failed', error: 'Error: <script>alert(1)</script> boom', attempts: 1, startedAt: at(-HOUR), durationMs: 3 },
    { id: 'notify-crm', kind: 'invoke', status: 'done', output: { service: 'crm' }, childId: crm, childTask: 'notify', startedAt: at(-HOUR) },
    { id: 'notify-analytics', kind: 'invoke', status: 'waiting', childId: analytics, childTask: 'notify', startedAt: at(-HOUR) },
    { id: 'notify-billing', kind: 'invoke', status: 'waiting', childId: billing, childTask: 'notify', startedAt: at(-HOUR) },
  ]);
  return { parent, crm, analytics, billing };
}

async function jobJson(id: string) {
  const res = await t.call('GET', `/v1/jobs/${id}`);
  expect(res.status).toBe(200);
  return ((await res.json()) as { job: any }).job;
}

describe('GET /v1/jobs/:id', () => {
  test('the job with its steps in order (a sleep with its wake time, an invoke with its child) and its children', async () => {
    const { parent, crm, analytics, billing } = await waitingWorkflow();
    const job = await jobJson(parent);
    expect(job).toMatchObject({ id: parent, status: 'WAITING', parentId: null, parentStep: null, pendingChildren: 2, stepCount: 7 });
    expect(job.steps.map((s: any) => [s.seq, s.id, s.kind, s.status])).toEqual([
      [0, 'create-account', 'step', 'done'],
      [1, 'wait-a-day', 'sleep', 'done'],
      [2, 'send-welcome-email', 'step', 'done'],
      [3, 'flaky <b>call</b>', 'step', 'failed'],
      [4, 'notify-crm', 'invoke', 'done'],
      [5, 'notify-analytics', 'invoke', 'waiting'],
      [6, 'notify-billing', 'invoke', 'waiting'],
    ]);
    expect(job.steps[0]).toEqual({
      id: 'create-account', seq: 0, kind: 'step', status: 'done', output: { userId: 'u-1' }, error: null, attempts: 1,
      startedAt: at(-2 * HOUR), finishedAt: at(-2 * HOUR + 12), durationMs: 12, wakeAt: null, childId: null, childTask: null,
    });
    expect(job.steps[1]).toMatchObject({ kind: 'sleep', wakeAt: at(-HOUR), output: null });
    expect(job.steps[3]).toMatchObject({ error: 'Error: <script>alert(1)</script> boom', output: null });
    expect(job.steps[4]).toMatchObject({ childId: crm, childTask: 'notify', output: { service: 'crm' } });
    expect(job.children).toEqual([
      { id: crm, task: 'notify', status: 'DONE', parentStep: 'notify-crm' },
      { id: analytics, task: 'notify', status: 'QUEUED', parentStep: 'notify-analytics' },
      { id: billing, task: 'notify', status: 'QUEUED', parentStep: 'notify-billing' },
    ]);
    // A child names its parent and the step that invoked it.
    expect(await jobJson(analytics)).toMatchObject({ parentId: parent, parentStep: 'notify-analytics', steps: [], children: [] });
  });

  test('a job without steps has empty lists, and the typed client reads the same JSON', async () => {
    const plain = await t.skiplock.enqueue({ task: 'echo', payload: { message: 'plain' } });
    expect(await jobJson(plain.id)).toMatchObject({ stepCount: 0, pendingChildren: 0, parentId: null, steps: [], children: [] });
    const { parent } = await waitingWorkflow();
    const client = createClient({ url: 'http://skiplock.test', token: API_TOKEN, fetch: (request) => t.app.request(request) });
    const job = (await client.getJob(parent))!;
    expect(job.steps).toHaveLength(7);
    expect(job.children.map((c) => c.parentStep)).toEqual(['notify-crm', 'notify-analytics', 'notify-billing']);
  });

  test(`children are capped at ${CHILD_LIMIT}, the first by id`, async () => {
    const parent = await insertJob({ status: 'WAITING', pendingChildren: CHILD_LIMIT + 5 });
    await t.db.sql.query(
      statement(
        `INSERT INTO skiplock.job (task, payload, parent_id, parent_step) SELECT 'notify', '{}', $1::bigint, 'n-' || i FROM generate_series(1, $2::int) i`,
        [parent, CHILD_LIMIT + 5],
      ),
    );
    const job = await jobJson(parent);
    expect(job.children).toHaveLength(CHILD_LIMIT);
    expect(job.children[0].parentStep).toBe('n-1');
    expect(job.children.at(-1).parentStep).toBe(`n-${CHILD_LIMIT}`);
  });

  test('lists stay cheap: no steps or children, and ?status=waiting finds WAITING jobs in any case', async () => {
    const { parent } = await waitingWorkflow();
    for (const status of ['waiting', 'WAITING', 'Waiting']) {
      const res = await t.call('GET', `/v1/jobs?status=${status}&limit=500`);
      expect(res.status).toBe(200);
      const { jobs } = (await res.json()) as { jobs: any[] };
      expect(jobs.length).toBeGreaterThan(0);
      expect(jobs.every((j) => j.status === 'WAITING' && !('steps' in j) && !('children' in j))).toBe(true);
      expect(jobs.map((j) => j.id)).toContain(parent);
      expect(jobs.find((j) => j.id === parent)).toMatchObject({ stepCount: 7, pendingChildren: 2 });
    }
  });

  test('stats and metrics count WAITING jobs', async () => {
    const stats = (await (await t.call('GET', '/v1/stats')).json()) as any;
    expect(stats.counts.WAITING).toBeGreaterThan(0);
    expect(stats.byTask['signup-workflow'].WAITING).toBeGreaterThan(0);
    const metrics = await (await t.call('GET', '/metrics')).text();
    expect(metrics).toMatch(/^skiplock_jobs_by_status\{status="WAITING"\} [1-9]\d*$/m);
    expect(metrics).toMatch(/^skiplock_jobs\{status="WAITING",task="signup-workflow"\} [1-9]\d*$/m);
  });

  test('the OpenAPI document describes the steps, the children and the cheap lists', async () => {
    const doc = (await (await t.call('GET', '/openapi.json')).json()) as any;
    const schemas = doc.components.schemas;
    // JobDetail is Job and its steps and children.
    expect(schemas.JobDetail.allOf[0]).toEqual({ $ref: '#/components/schemas/Job' });
    expect(schemas.JobDetail.allOf[1].required).toEqual(['steps', 'children']);
    expect(Object.keys(schemas.Job.properties)).toEqual(expect.arrayContaining(['parentId', 'parentStep', 'pendingChildren', 'stepCount']));
    expect(schemas.JobStep.properties.kind.enum).toEqual(['step', 'sleep', 'invoke', 'patch', 'event', 'callback', 'any-event']);
    expect(schemas.Job.properties.status.enum).toContain('WAITING');
    expect(doc.paths['/v1/jobs/{id}'].get.responses['200'].content['application/json'].schema.$ref).toBe('#/components/schemas/JobDetailEnvelope');
    expect(doc.paths['/v1/jobs'].get.description).toMatch(/without its steps/);
  });
});

describe('the dashboard', () => {
  test('a WAITING parent: why it waits, its steps (escaped), its children, and Cancel', async () => {
    const { parent, crm, analytics } = await waitingWorkflow();
    const res = await getPage(t, `/jobs/${parent}`, cookie);
    expect(res.status).toBe(200);
    const page = await res.text();
    expect(page).toContain('<span class="badge status-waiting">WAITING</span>');
    expect(page).toMatch(/<p class="subtitle" data-waiting>Waiting for 2 of 3 children to end \(steps <code>notify-analytics<\/code>, <code>notify-billing<\/code>\)/);
    expect(page).toContain(`action="/jobs/${parent}/cancel"`);

    const steps = page.slice(page.indexOf('<h2>Steps'), page.indexOf('<h2>Children'));
    expect(steps).toContain('(7 steps)');
    for (const id of ['create-account', 'wait-a-day', 'send-welcome-email', 'notify-crm', 'notify-analytics', 'notify-billing']) expect(steps).toContain(`data-step="${id}"`);
    expect(steps.indexOf('create-account')).toBeLessThan(steps.indexOf('send-welcome-email'));
    expect(steps).toContain('<code>{&quot;userId&quot;:&quot;u-1&quot;}</code>');
    expect(steps).toMatch(/woke at 2026-12-01 11:00:00 UTC/);
    expect(steps).toMatch(/<td class="num">2<\/td>\s*<td>1 s<\/td>/); // attempts and duration of send-welcome-email
    // A long output is cut, with the whole in a <details>.
    expect(steps).toMatch(/<details><summary><code>\{&quot;long&quot;:&quot;x{60,}…<\/code><\/summary><pre class="code">\{\n {2}&quot;long&quot;: &quot;x{300}&quot;\n\}<\/pre><\/details>/);
    // The invoke links its child, with the child's task and status.
    expect(steps).toContain(`<a href="/jobs/${crm}">#${crm}</a> <span class="muted">notify</span> <span class="badge status-done">DONE</span>`);
    expect(steps).toContain(`<a href="/jobs/${analytics}">#${analytics}</a>`);
    // Escaped: a step id and an error that hold HTML are text.
    expect(page).toContain('flaky &lt;b&gt;call&lt;/b&gt;');
    expect(page).toContain('Error: &lt;script&gt;alert(1)&lt;/script&gt; boom');
    expect(page).not.toContain('<script>alert(1)');
    expect(page).not.toContain('<b>call</b>');

    const children = page.slice(page.indexOf('<h2>Children'));
    expect(children).toContain('(3 jobs, 2 not ended)');
    expect(children).toContain(`<tr data-child="${analytics}"><td class="mono"><a href="/jobs/${analytics}">#${analytics}</a></td><td>notify</td><td><span class="badge status-queued">QUEUED</span></td><td class="mono">notify-analytics</td></tr>`);
  });

  test('Cancel on a WAITING parent: CANCELLED, and its children that had not ended with it; over HTTP: 200', async () => {
    const csrf = await csrfOf(t, cookie);
    const { parent, crm, analytics, billing } = await waitingWorkflow();
    const res = await postForm(t, `/jobs/${parent}/cancel`, { csrf }, { cookie });
    expect(res.headers.get('location')).toBe(`/jobs/${parent}?notice=cancelled&job=${parent}`);
    expect((await t.skiplock.getJob(parent))?.status).toBe('CANCELLED');
    expect((await t.skiplock.getJob(crm))?.status).toBe('DONE');
    expect((await t.skiplock.getJob(analytics))?.status).toBe('CANCELLED');
    expect((await t.skiplock.getJob(billing))?.status).toBe('CANCELLED');
    const other = await waitingWorkflow();
    const api = await t.call('POST', `/v1/jobs/${other.parent}/cancel`);
    expect(api.status).toBe(200);
    expect(((await api.json()) as any).job).toMatchObject({ id: other.parent, status: 'CANCELLED' });
  });

  test('a child links its parent and the step that invoked it', async () => {
    const { parent, billing } = await waitingWorkflow();
    const page = await (await getPage(t, `/jobs/${billing}`, cookie)).text();
    expect(page).toContain(`<dt>Parent</dt><dd><a href="/jobs/${parent}">#${parent}</a> · step <code>notify-billing</code></dd>`);
    expect(page).not.toContain('<h2>Steps');
    expect(page).not.toContain('<h2>Children');
  });

  test('a QUEUED job in a sleep says it is sleeping, which step, and until when', async () => {
    const wake = at(3 * HOUR);
    const job = await insertJob({ task: 'signup-workflow', status: 'QUEUED', stepCount: 2, runAt: wake });
    await insertSteps(job, [
      { id: 'create-account', kind: 'step', status: 'done', output: { userId: 'u-2' }, attempts: 1, startedAt: at(-60_000), durationMs: 5 },
      { id: 'wait-a-day', kind: 'sleep', status: 'sleeping', wakeAt: wake, startedAt: at(-50_000) },
    ]);
    const page = await (await getPage(t, `/jobs/${job}`, cookie)).text();
    expect(page).toMatch(/data-waiting>Waiting: it is sleeping \(step <code>wait-a-day<\/code>\) until 2026-12-01 15:00:00 UTC \(<time[^>]*>in 3 h<\/time>\)\.<\/p>/);
    expect(page).toMatch(/<dt>Waiting<\/dt><dd>sleeping \(step <code>wait-a-day<\/code>\): not due until 2026-12-01 15:00:00 UTC/);
    expect(page).toMatch(/data-step="wait-a-day"[\s\S]*sleeping until 2026-12-01 15:00:00 UTC, <time[^>]*>in 3 h<\/time>/);
    expect(page).toContain('<span class="badge tone-waiting">sleeping</span>');
    // The actions of a QUEUED job not yet due.
    expect(page).toContain('Run now');
  });

  test('WAITING is a status everywhere statuses are listed: overview, jobs filter, tasks', async () => {
    await waitingWorkflow();
    const overview = await (await getPage(t, '/', cookie)).text();
    expect(overview).toMatch(/<a class="stat waiting" href="\/jobs\?status=WAITING">\s*<div class="label">waiting<\/div><div class="value">[1-9]/);
    expect(overview).toContain('<th class="num">waiting</th>');
    const jobs = await (await getPage(t, '/jobs?status=waiting', cookie)).text();
    expect(jobs).toContain('<option value="WAITING" selected>WAITING</option>');
    expect(jobs).toContain('data-status="WAITING"');
    expect(jobs).not.toContain('data-status="QUEUED"');
    const tasks = await (await getPage(t, '/tasks', cookie)).text();
    expect(tasks).toContain('<th class="num">WAITING</th>');
    expect(tasks).toContain(`<a href="/jobs?task=signup-workflow&amp;status=WAITING">`);
  });
});
