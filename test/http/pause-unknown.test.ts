/**
 * Pausing only a task some deployment runs (issue 30 item 11): a name no deployment registered is
 * refused (404 not_found) by the HTTP route, skiplock.pauseTask and the dashboard, and leaves no
 * paused row (no skiplock_task_paused series); a task another deployment registered can be paused
 * from here; resume accepts any name, so that rows paused before this check can be cleared.
 */
import { afterAll, beforeAll, expect, test } from 'vitest';
import { z } from 'zod';
import { createSkiplock, defineTask } from '../../src/index.ts';
import { statement } from '../../src/store/sql.ts';
import { createTestApp, type TestApp } from './helpers.ts';
import { csrfOf, logIn, postForm } from './dashboard-support.ts';

let t: TestApp;
beforeAll(async () => {
  t = await createTestApp();
});
afterAll(() => t.close());

const pausedRows = async () => (await t.db.sql.query(statement(`SELECT name FROM skiplock.paused_task ORDER BY name`))).map((r) => r.name);
const json = async (res: Response) => (await res.json()) as any;

test('POST /v1/tasks/{name}/pause of a task no deployment registered: 404 not_found, nothing written', async () => {
  const res = await t.call('POST', '/v1/tasks/no-such-task/pause');
  expect(res.status).toBe(404);
  const body = await json(res);
  expect(body.error.code).toBe('not_found');
  expect(body.error.message).toMatch(/no-such-task.*no deployment/);
  expect(await pausedRows()).toEqual([]);
  expect(await (await t.call('GET', '/metrics')).text()).not.toContain('skiplock_task_paused{task="no-such-task"}');
  await expect(t.skiplock.pauseTask('no-such-task')).rejects.toMatchObject({ code: 'not_found' });
  expect(await pausedRows()).toEqual([]);
});

test('a task of this deployment, or one another deployment registered, can be paused from here', async () => {
  expect((await t.call('POST', '/v1/tasks/echo/pause')).status).toBe(200);
  const elsewhere = defineTask({ name: 'elsewhere', payload: z.object({}), timeoutMs: 1_000, handler: () => null });
  const other = createSkiplock({ sql: t.db.sql, tasks: [elsewhere], log: () => {}, retention: false });
  await other.tick({ untilIdle: true, budgetMs: 3_000, pollIntervalMs: 10 }); // registers 'elsewhere'
  const res = await t.call('POST', '/v1/tasks/elsewhere/pause');
  expect(res.status).toBe(200);
  expect((await json(res)).task).toMatchObject({ name: 'elsewhere', state: 'paused' });
  // A process with no tasks at all (a script, the CLI without --tasks) pauses a registered task too.
  const bare = createSkiplock({ sql: t.db.sql, tasks: [], log: () => {} });
  await expect(bare.pauseTask('elsewhere')).resolves.toMatchObject({ state: 'paused' });
  await expect(bare.pauseTask('never-registered')).rejects.toMatchObject({ code: 'not_found' });
  expect(await pausedRows()).toEqual(['echo', 'elsewhere']);
  for (const name of ['echo', 'elsewhere']) expect((await t.call('POST', `/v1/tasks/${name}/resume`)).status).toBe(200);
});

test('resume accepts any name: a row paused before the check (an unknown name) is cleared, and its series with it', async () => {
  await t.db.sql.query(statement(`INSERT INTO skiplock.paused_task (name) VALUES ('typo-task')`));
  expect(await (await t.call('GET', '/metrics')).text()).toContain('skiplock_task_paused{task="typo-task"} 1');
  const res = await t.call('POST', '/v1/tasks/typo-task/resume');
  expect(res.status).toBe(200);
  expect((await json(res)).task).toMatchObject({ name: 'typo-task', state: 'active' });
  expect(await pausedRows()).toEqual([]);
  expect(await (await t.call('GET', '/metrics')).text()).not.toContain('typo-task');
});

test('the OpenAPI document gives the pause route its 404', async () => {
  const doc = await json(await t.call('GET', '/openapi.json', { token: null }));
  expect(Object.keys(doc.paths['/v1/tasks/{name}/pause'].post.responses)).toContain('404');
});

test('the dashboard: pausing an unknown task writes nothing and says why', async () => {
  const cookie = await logIn(t);
  const csrf = await csrfOf(t, cookie, '/tasks');
  const res = await postForm(t, '/tasks/ghost/pause', { csrf }, { cookie });
  expect(res.status).toBe(303);
  expect(res.headers.get('location')).toBe('/tasks?notice=unknown-task&task=ghost');
  expect(await pausedRows()).toEqual([]);
  const page = await (await t.app.request(new Request(`http://localhost${res.headers.get('location')}`, { headers: { cookie } }))).text();
  expect(page).toMatch(/No deployment registers a task <strong>ghost<\/strong>/);
});
