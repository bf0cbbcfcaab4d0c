/** Stats, tick, health, metrics, the OpenAPI document and docs, limits, unknown routes, background work. */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { createApp } from '../../src/http/app.ts';
import { createSkiplock } from '../../src/runtime/skiplock.ts';
import { createPgDriver } from '../../src/store/drivers/pg.ts';
import { exampleTasks } from '../../src/tasks/examples.ts';
import { API_TOKEN, createTestApp, type TestApp } from './helpers.ts';

let t: TestApp;
beforeAll(async () => (t = await createTestApp({ app: { maxBodyBytes: 64 * 1024 } })));
afterAll(() => t.close());

async function enqueue(body: unknown) {
  const res = await t.call('POST', '/v1/jobs', { body });
  expect(res.status).toBe(201);
  return ((await res.json()) as any).job;
}

describe('GET /v1/stats and /v1/tick', () => {
  test('counts by status and task, the oldest due job, and a tick that runs them', async () => {
    const empty = await t.call('GET', '/v1/stats');
    expect(empty.status).toBe(200);
    expect(await empty.json()).toEqual({ counts: { QUEUED: 0, RUNNING: 0, WAITING: 0, DONE: 0, DEAD: 0, CANCELLED: 0 }, byTask: {}, oldestQueuedAgeMs: 0, unrunnable: [], depth: { due: 0, scheduled: 0, running: 0, waiting: 0 }, doneCount: 'exact' });

    await enqueue({ task: 'echo', payload: { message: 'a' }, runAt: '2000-01-01T00:00:00Z' });
    await enqueue({ task: 'echo', payload: { message: 'b' } });
    await enqueue({ task: 'poison', payload: {} });
    await enqueue({ task: 'echo', payload: { message: 'later' }, delayMs: 3_600_000 });
    const cancelled = await enqueue({ task: 'poison', payload: {}, delayMs: 3_600_000 });
    await t.call('POST', `/v1/jobs/${cancelled.id}/cancel`);

    const before = (await (await t.call('GET', '/v1/stats')).json()) as any;
    expect(before.counts).toEqual({ QUEUED: 4, RUNNING: 0, WAITING: 0, DONE: 0, DEAD: 0, CANCELLED: 1 });
    expect(before.byTask).toEqual({
      echo: { QUEUED: 3, RUNNING: 0, WAITING: 0, DONE: 0, DEAD: 0, CANCELLED: 0 },
      poison: { QUEUED: 1, RUNNING: 0, WAITING: 0, DONE: 0, DEAD: 0, CANCELLED: 1 },
    });
    // The job due in 2000 has waited decades.
    expect(before.oldestQueuedAgeMs).toBeGreaterThan(20 * 365 * 24 * 3600 * 1000);

    for (const method of ['GET', 'POST']) {
      const res = await t.call(method, '/v1/tick');
      expect(res.status).toBe(200);
      const result = await res.json();
      expect(Object.keys(result as object).sort()).toEqual(['cancelled', 'claimed', 'dead', 'done', 'fired', 'reaped', 'retried', 'staleWrites', 'suspended']);
      if (method === 'GET') expect(result).toMatchObject({ claimed: 3, done: 2, dead: 1, retried: 0, fired: 0, reaped: 0 });
      else expect(result).toMatchObject({ claimed: 0 });
    }
    const after = (await (await t.call('GET', '/v1/stats')).json()) as any;
    expect(after.counts).toEqual({ QUEUED: 1, RUNNING: 0, WAITING: 0, DONE: 2, DEAD: 1, CANCELLED: 1 });
    expect(after.oldestQueuedAgeMs).toBe(0);
  });
});

describe('GET /metrics', () => {
  test('Prometheus text: job gauges from the database and tick counters of this isolate', async () => {
    const res = await t.call('GET', '/metrics');
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    const text = await res.text();
    const value = (series: string) => {
      const line = text.split('\n').find((l) => l.startsWith(`${series} `));
      return line === undefined ? undefined : Number(line.slice(series.length + 1));
    };
    expect(value('skiplock_jobs{status="DONE",task="echo"}')).toBe(2);
    expect(value('skiplock_jobs{status="DEAD",task="poison"}')).toBe(1);
    expect(value('skiplock_jobs_by_status{status="QUEUED"}')).toBe(1);
    expect(value('skiplock_oldest_queued_age_seconds')).toBe(0);
    expect(value('skiplock_claims_total')).toBe(3);
    expect(value('skiplock_completions_total')).toBe(2);
    expect(value('skiplock_dead_total')).toBe(1);
    expect(value('skiplock_retries_total')).toBe(0);
    expect(value('skiplock_suspended_total')).toBe(0);
    expect(value('skiplock_stale_writes_total')).toBe(0);
    expect(value('skiplock_ticks_total')).toBe(2);
    expect(value('skiplock_tick_duration_seconds_count')).toBe(2);
    expect(value('skiplock_tick_duration_seconds_bucket{le="+Inf"}')).toBe(2);
    expect(value('skiplock_tick_duration_seconds_sum')).toBeGreaterThan(0);
    // Every sample line is `name{labels} number`, every family has HELP and TYPE.
    for (const line of text.trimEnd().split('\n')) expect(line).toMatch(/^(# (HELP|TYPE) \w+ .+|\w+(\{[^}]*\})? [0-9.e+-]+)$/);
  });
});

describe('GET /healthz', () => {
  test('200 {ok: true}: liveness, with no token', async () => {
    const res = await t.call('GET', '/healthz', { token: null });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ ok: true });
  });

  test('liveness answers 200 without the database; ?deep=1 answers 503 {ok: false, database: down} when it does not answer', async () => {
    const sql = createPgDriver('postgres://nobody:nothing@127.0.0.1:1/none', { connectionTimeoutMillis: 2000 });
    const app = createApp({ skiplock: createSkiplock({ sql, tasks: exampleTasks, log: () => {} }), apiToken: API_TOKEN });
    const errors: unknown[] = [];
    const original = console.error;
    console.error = (...args: unknown[]) => errors.push(args);
    try {
      expect((await app.request('/healthz')).status).toBe(200);
      const res = await app.request('/healthz?deep=1', { headers: { authorization: `Bearer ${API_TOKEN}` } });
      expect(res.status).toBe(503);
      expect(await res.json()).toEqual({ ok: false, database: 'down', schema: null });
      // Other routes fail as 500 with the error shape, never leaking the cause.
      const stats = await app.request('/v1/stats', { headers: { authorization: `Bearer ${API_TOKEN}` } });
      expect(stats.status).toBe(500);
      expect(await stats.json()).toEqual({ error: { code: 'internal', message: 'internal error' } });
    } finally {
      console.error = original;
      await sql.close();
    }
    expect(errors).toHaveLength(2);
  });
});

describe('OpenAPI document and docs page', () => {
  test('/openapi.json documents every route of CONTRACT.md, generated from the zod schemas', async () => {
    const res = await t.call('GET', '/openapi.json', { token: null });
    expect(res.status).toBe(200);
    const doc = (await res.json()) as any;
    expect(doc.openapi).toBe('3.1.0');
    const operations = Object.entries(doc.paths).flatMap(([path, item]) => Object.keys(item as object).map((m) => `${m.toUpperCase()} ${path}`));
    expect(operations).toEqual(
      expect.arrayContaining([
        'POST /v1/jobs',
        'POST /v1/jobs/batch',
        'GET /v1/jobs/{id}',
        'GET /v1/jobs',
        'POST /v1/jobs/{id}/cancel',
        'POST /v1/jobs/{id}/retry',
        'POST /v1/jobs/retry-dead',
        'GET /v1/stats',
        'GET /v1/tick',
        'POST /v1/tick',
        'GET /healthz',
        'GET /metrics',
      ]),
    );
    expect(doc.components.schemas.EnqueueInput.properties.task).toMatchObject({ type: 'string', minLength: 1, maxLength: 200 });
    expect(doc.components.schemas.EnqueueBatchInput.properties.jobs.maxItems).toBe(1000);
    expect(doc.components.schemas.Job.required).toEqual(expect.arrayContaining(['id', 'task', 'status', 'runAt']));
    expect(doc.paths['/v1/jobs'].post.responses).toHaveProperty('201');
    expect(doc.paths['/v1/jobs'].post.responses).toHaveProperty('200');
    expect(doc.paths['/v1/jobs'].post.parameters).toContainEqual(expect.objectContaining({ name: 'idempotency-key', in: 'header' }));
    expect(doc.paths['/v1/jobs'].get.parameters.map((p: any) => p.name).sort()).toEqual(['cursor', 'limit', 'status', 'task']);
    expect(doc.components.securitySchemes.bearer).toMatchObject({ type: 'http', scheme: 'bearer' });
  });

  test('/docs is a self-contained HTML page listing the routes', async () => {
    const res = await t.call('GET', '/docs', { token: null });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/html/);
    const html = await res.text();
    expect(html).toContain('POST /v1/jobs/batch');
    expect(html).toContain('GET /v1/jobs/{id}');
    expect(html).not.toMatch(/<script|https?:\/\/(?!.*skiplock)/);
  });
});

describe('limits and unknown routes', () => {
  test('a body over maxBodyBytes is 413 payload_too_large, with or without Content-Length, and writes nothing', async () => {
    const before = await t.countJobs();
    const big = JSON.stringify({ task: 'echo', payload: { message: 'x'.repeat(70 * 1024) } });
    const streamed = await t.call('POST', '/v1/jobs', { body: big });
    expect(streamed.status).toBe(413);
    expect(await streamed.json()).toMatchObject({ error: { code: 'payload_too_large' } });
    const declared = await t.call('POST', '/v1/jobs/batch', { body: big, headers: { 'content-length': String(big.length) } });
    expect(declared.status).toBe(413);
    expect(await t.countJobs()).toBe(before);
    // Just under the limit is fine.
    const fits = await t.call('POST', '/v1/jobs', { body: { task: 'echo', payload: { message: 'x'.repeat(60 * 1024) } } });
    expect(fits.status).toBe(201);
  });

  test('the default limit is 1 MiB', async () => {
    const app = createApp({ skiplock: t.skiplock, apiToken: API_TOKEN });
    const body = JSON.stringify({ task: 'echo', payload: { message: 'x'.repeat(1024 * 1024) } });
    const res = await app.request('/v1/jobs', { method: 'POST', body, headers: { authorization: `Bearer ${API_TOKEN}`, 'content-type': 'application/json' } });
    expect(res.status).toBe(413);
  });

  // GET / is the dashboard now (test/http/dashboard.test.ts).
  test.each([
    ['GET', '/nope'],
    ['GET', '/v1/nope'],
    ['POST', '/v1/jobs/1/nope'],
  ])('%s %s → 404 in the error format', async (method, path) => {
    const res = await t.call(method, path);
    expect(res.status).toBe(404);
    expect(await res.json()).toMatchObject({ error: { code: 'not_found', message: expect.any(String) } });
  });

  // A known path with another method: 405 with Allow (test/http/openapi.test.ts has more).
  test.each([
    ['DELETE', '/', 'GET, HEAD'],
    ['DELETE', '/v1/jobs', 'GET, HEAD, POST'],
    ['PUT', '/v1/jobs/1', 'GET, HEAD, PATCH'],
    ['GET', '/v1/jobs/1/cancel', 'POST'],
    ['POST', '/healthz', 'GET, HEAD'],
  ])('%s %s → 405 method_not_allowed with Allow: %s', async (method, path, allow) => {
    const res = await t.call(method, path);
    expect(res.status).toBe(405);
    expect(res.headers.get('allow')).toBe(allow);
    expect(await res.json()).toMatchObject({ error: { code: 'method_not_allowed', message: expect.any(String) } });
  });

  test('createApp refuses an empty API token', () => {
    expect(() => createApp({ skiplock: t.skiplock, apiToken: '' })).toThrow(/API_TOKEN is not set/);
  });
});

describe('runInBackground', () => {
  test('after an enqueue the app hands the platform a tick that runs the new job', async () => {
    const handed: Promise<unknown>[] = [];
    const app = createApp({ skiplock: t.skiplock, apiToken: API_TOKEN, tick: { budgetMs: 20_000 }, runInBackground: (work) => handed.push(work) });
    const headers = { authorization: `Bearer ${API_TOKEN}`, 'content-type': 'application/json' };
    const res = await app.request('/v1/jobs', { method: 'POST', headers, body: JSON.stringify({ task: 'echo', payload: { message: 'now' } }) });
    expect(res.status).toBe(201);
    const { job } = (await res.json()) as any;
    expect(handed).toHaveLength(1);
    await handed[0];
    expect(await t.skiplock.getJob(job.id)).toMatchObject({ status: 'DONE', result: { message: 'now' } });

    // A replay or a failed enqueue starts nothing.
    await app.request('/v1/jobs', { method: 'POST', headers, body: JSON.stringify({ task: 'nope' }) });
    const keyed = JSON.stringify({ task: 'echo', payload: { message: 'k' }, idempotencyKey: 'bg' });
    await app.request('/v1/jobs', { method: 'POST', headers, body: keyed });
    await app.request('/v1/jobs', { method: 'POST', headers, body: keyed });
    expect(handed).toHaveLength(2);
    await Promise.all(handed);
  });

  test('a created or replaced dynamic schedule starts a tick too (in alarm mode it wakes the ticker, which plans the first instant)', async () => {
    const handed: Promise<unknown>[] = [];
    const app = createApp({ skiplock: t.skiplock, apiToken: API_TOKEN, tick: { budgetMs: 20_000 }, runInBackground: (work) => handed.push(work) });
    const headers = { authorization: `Bearer ${API_TOKEN}`, 'content-type': 'application/json' };
    const put = (body: unknown) => app.request('/v1/schedules/bg-every-minute', { method: 'PUT', headers, body: JSON.stringify(body) });
    expect((await put({ cron: '* * * * *', task: 'echo', payload: { message: 's' } })).status).toBe(201);
    expect(handed).toHaveLength(1);
    expect((await put({ cron: '*/5 * * * *', task: 'echo', payload: { message: 's' } })).status).toBe(200);
    expect(handed).toHaveLength(2);
    // A refused one starts nothing.
    expect((await put({ cron: 'not a cron', task: 'echo' })).status).toBe(400);
    expect(handed).toHaveLength(2);
    await Promise.all(handed);
    await app.request('/v1/schedules/bg-every-minute', { method: 'DELETE', headers });
  });
});
