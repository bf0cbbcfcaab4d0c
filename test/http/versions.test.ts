/** POST /v1/jobs/:id/restart and POST /v1/jobs/bulk over the app, and their place in /openapi.json. */
import { afterAll, beforeAll, expect, test } from 'vitest';
import { statement } from '../../src/store/sql.ts';
import { createTestApp, type TestApp } from './helpers.ts';

let t: TestApp;
beforeAll(async () => (t = await createTestApp()));
afterAll(() => t.close());

test('restart: 200 with the job, 404 for no such job or step, 409 for the same request again (the job live) or once DONE, 400 for a bad body', async () => {
  const job = await t.skiplock.enqueue({ task: 'poison', payload: {} });
  await t.skiplock.tick({ untilIdle: true });
  expect((await t.skiplock.getJob(job.id))!.status).toBe('DEAD');
  expect((await t.call('POST', `/v1/jobs/${job.id}/restart`, { body: { fromStep: 'nope' } })).status).toBe(404);
  const ok = await t.call('POST', `/v1/jobs/${job.id}/restart`, { body: {} });
  expect(ok.status).toBe(200);
  expect(((await ok.json()) as { job: unknown }).job).toMatchObject({ id: job.id, status: 'QUEUED', attempts: 0 });
  // The same request again (a client retrying): the job is live again, so 409 and nothing re-run.
  const again = await t.call('POST', `/v1/jobs/${job.id}/restart`, { body: {} });
  expect(again.status).toBe(409);
  expect(((await again.json()) as { error: { code: string; message: string } }).error).toMatchObject({ code: 'conflict', message: expect.stringMatching(/is QUEUED: only a DEAD or CANCELLED job can be restarted/) });
  expect((await t.call('POST', `/v1/jobs/424242/restart`, { body: {} })).status).toBe(404);
  expect((await t.call('POST', `/v1/jobs/${job.id}/restart`, { body: { fromStep: 7 } })).status).toBe(400);
  const echo = await t.skiplock.enqueue({ task: 'echo', payload: { message: 'x' } });
  await t.db.sql.query(statement(`UPDATE skiplock.job SET status = 'DONE', finished_at = now() WHERE id = $1`, [echo.id]));
  const conflict = await t.call('POST', `/v1/jobs/${echo.id}/restart`, { body: {} });
  expect(conflict.status).toBe(409);
});

test('bulk: counts what matched and changed; bad input 400 with nothing written', async () => {
  const before = await t.countJobs();
  for (const body of [{}, { action: 'retry', where: {} }, { action: 'retry', where: { task: 'poison' }, extra: 1 }]) {
    const res = await t.call('POST', '/v1/jobs/bulk', { body });
    expect(res.status).toBe(400);
  }
  expect(await t.countJobs()).toBe(before);
  const dry = await t.call('POST', '/v1/jobs/bulk', { body: { action: 'delete', where: { status: ['done', 'dead', 'queued'] }, dryRun: true } });
  // A dry run changes nothing and says so: changed 0, what it would change as wouldChange.
  expect(await dry.json()).toEqual({ matched: before, changed: 0, wouldChange: expect.any(Number) });
  expect(await t.countJobs()).toBe(before);
  const res = await t.call('POST', '/v1/jobs/bulk', { body: { action: 'cancel', where: { task: 'poison' } } });
  expect(res.status).toBe(200);
  expect(await res.json()).toEqual({ matched: 1, changed: 1 });
});

test('both routes are in the OpenAPI document', async () => {
  const doc = (await (await t.call('GET', '/openapi.json', { token: null })).json()) as any;
  expect(doc.paths['/v1/jobs/{id}/restart'].post).toBeDefined();
  expect(doc.paths['/v1/jobs/bulk'].post.requestBody).toBeDefined();
  expect(doc.components.schemas.BulkResult).toMatchObject({ required: ['matched', 'changed'], properties: { wouldChange: { type: 'integer' } } });
});

test('jobs nothing here can run: listed by GET /v1/stats, a /metrics gauge', async () => {
  await t.db.sql.query(statement(`INSERT INTO skiplock.job (task) SELECT 'renamed-task' FROM generate_series(1, 3)`));
  const stats = (await (await t.call('GET', '/v1/stats')).json()) as { unrunnable: unknown };
  expect(stats.unrunnable).toEqual([{ task: 'renamed-task', queued: 3, waiting: 0 }]);
  const metrics = await (await t.call('GET', '/metrics')).text();
  expect(metrics).toContain('skiplock_jobs_unrunnable{task="renamed-task"} 3');
});
