/** Issue 14 over HTTP: debounce on POST /v1/jobs, /v1/tasks pause and resume, PATCH /v1/jobs/:id. */
import { afterAll, beforeAll, expect, test } from 'vitest';
import { createTestApp, type TestApp } from './helpers.ts';

let t: TestApp;
beforeAll(async () => {
  t = await createTestApp();
});
afterAll(() => t.close());

async function json(res: Response): Promise<any> {
  return res.json();
}

test('POST /v1/jobs with debounce: 201 for the new job, 200 with the same job updated after', async () => {
  const body = (message: string) => ({ task: 'echo', payload: { message }, debounce: { key: 'user-7', delayMs: 60_000, maxDelayMs: 600_000 } });
  const first = await t.call('POST', '/v1/jobs', { body: body('a') });
  expect(first.status).toBe(201);
  const second = await t.call('POST', '/v1/jobs', { body: body('b') });
  expect(second.status).toBe(200);
  const [a, b] = [(await json(first)).job, (await json(second)).job];
  expect(b.id).toBe(a.id);
  expect(b.payload).toEqual({ message: 'b' });
  const refused = await t.call('POST', '/v1/jobs', { body: { ...body('c'), delayMs: 5 } });
  expect(refused.status).toBe(400);
  expect((await json(refused)).error.issues[0].path).toEqual(['debounce']);
  const bad = await t.call('POST', '/v1/jobs', { body: { task: 'echo', payload: { message: 'x' }, debounce: { key: 'k', delayMs: -1, keep: 'middle' } } });
  expect(bad.status).toBe(400);
  const inBatch = await t.call('POST', '/v1/jobs/batch', { body: { jobs: [body('d')] } });
  expect(inBatch.status).toBe(400);
});

test('GET /v1/tasks, POST /v1/tasks/:name/pause and resume', async () => {
  await t.skiplock.enqueue({ task: 'echo', payload: { message: 'p' } });
  const paused = await t.call('POST', '/v1/tasks/echo/pause');
  expect(paused.status).toBe(200);
  expect((await json(paused)).task).toMatchObject({ name: 'echo', state: 'paused', pausedAt: expect.any(String) });
  await t.skiplock.tick({ untilIdle: true });
  const list = await json(await t.call('GET', '/v1/tasks'));
  const echo = list.tasks.find((task: { name: string }) => task.name === 'echo');
  expect(echo).toMatchObject({ state: 'paused', debounced: 1 });
  expect(echo.counts.QUEUED).toBe(2);
  expect(echo.counts.DONE).toBe(0);
  expect(list.tasks.map((task: { name: string }) => task.name)).toContain('poison');
  const resumed = await t.call('POST', '/v1/tasks/echo/resume');
  expect((await json(resumed)).task).toMatchObject({ state: 'active', pausedAt: null });
  expect((await t.call('POST', `/v1/tasks/${'x'.repeat(201)}/pause`)).status).toBe(400);
  expect((await t.call('POST', '/v1/tasks/a%00b/pause')).status).toBe(400);
});

test('PATCH /v1/jobs/:id: reschedule, run now, 409 once claimed, 400 and nothing written for a bad payload', async () => {
  const job = await t.skiplock.enqueue({ task: 'echo', payload: { message: 'old' }, delayMs: 3_600_000 });
  const runAt = '2031-01-01T00:00:00.000Z';
  const moved = await t.call('PATCH', `/v1/jobs/${job.id}`, { body: { runAt, payload: { message: 'new' }, priority: 3 } });
  expect(moved.status).toBe(200);
  expect((await json(moved)).job).toMatchObject({ runAt, payload: { message: 'new' }, priority: 3 });
  const before = await t.skiplock.getJob(job.id);
  const bad = await t.call('PATCH', `/v1/jobs/${job.id}`, { body: { payload: { message: 42 }, delayMs: 0 } });
  expect(bad.status).toBe(400);
  expect((await json(bad)).error.code).toBe('invalid_payload');
  expect(await t.skiplock.getJob(job.id)).toEqual(before);
  expect((await t.call('PATCH', `/v1/jobs/${job.id}`, { body: {} })).status).toBe(400);
  expect((await t.call('PATCH', `/v1/jobs/${job.id}`, { body: { delayMs: 0, extra: 1 } })).status).toBe(400);
  expect((await t.call('PATCH', '/v1/jobs/123456789', { body: { delayMs: 0 } })).status).toBe(404);
  const now = await t.call('PATCH', `/v1/jobs/${job.id}`, { body: { delayMs: 0 } });
  expect(now.status).toBe(200);
  await t.skiplock.tick({ untilIdle: true });
  expect((await t.skiplock.getJob(job.id))!.status).toBe('DONE');
  const done = await t.call('PATCH', `/v1/jobs/${job.id}`, { body: { delayMs: 0 } });
  expect(done.status).toBe(409);
  expect((await json(done)).error.code).toBe('conflict');
});

test('the OpenAPI document has the new routes', async () => {
  const doc = await json(await t.call('GET', '/openapi.json'));
  expect(Object.keys(doc.paths['/v1/jobs/{id}'])).toContain('patch');
  expect(doc.paths['/v1/tasks'].get).toBeDefined();
  expect(doc.paths['/v1/tasks/{name}/pause'].post).toBeDefined();
  expect(doc.paths['/v1/tasks/{name}/resume'].post).toBeDefined();
  expect(doc.components.schemas.EnqueueInput.properties.debounce).toBeDefined();
});

test('/metrics exports paused tasks and debounced jobs', async () => {
  await t.skiplock.pauseTask('poison');
  await t.skiplock.enqueue({ task: 'echo', payload: { message: 'm' }, debounce: { key: 'metrics', delayMs: 60_000 } });
  const text = await (await t.call('GET', '/metrics')).text();
  expect(text).toContain('# TYPE skiplock_task_paused gauge');
  expect(text).toContain('skiplock_task_paused{task="poison"} 1');
  expect(text).toMatch(/skiplock_jobs_debounced\{task="echo"\} [1-9]/);
  await t.skiplock.resumeTask('poison');
  expect(await (await t.call('GET', '/metrics')).text()).not.toContain('skiplock_task_paused{');
});
