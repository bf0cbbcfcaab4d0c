/** The dashboard's share of issue 14: the tasks page with Pause / Resume, "Run now", and why a QUEUED job waits. */
import { afterAll, beforeAll, expect, test } from 'vitest';
import { createTestApp, type TestApp } from './helpers.ts';
import { csrfOf, getPage, logIn, postForm } from './dashboard-support.ts';

let t: TestApp;
let cookie: string;
beforeAll(async () => {
  t = await createTestApp();
  cookie = await logIn(t);
});
afterAll(() => t.close());

const paused = async (name: string) => (await t.skiplock.listTasks()).find((task) => task.name === name)?.state;

test('the tasks page: counts, Pause and Resume with CSRF, and a job page that says its task is paused', async () => {
  const job = await t.skiplock.enqueue({ task: 'echo', payload: { message: 'p' } });
  const page = await (await getPage(t, '/tasks', cookie)).text();
  expect(page).toContain('data-task="echo" data-state="active"');
  expect(page).toContain('action="/tasks/echo/pause"');
  const csrf = await csrfOf(t, cookie, '/tasks');

  // CSRF as every dashboard action: without the token, nothing is done.
  expect((await postForm(t, '/tasks/echo/pause', {}, { cookie })).status).toBe(403);
  expect((await postForm(t, '/tasks/echo/pause', { csrf }, { cookie, origin: 'https://evil.example' })).status).toBe(403);
  expect((await postForm(t, '/tasks/echo/pause', { csrf })).status).toBe(303); // logged out: to /login
  expect(await paused('echo')).toBe('active');

  const res = await postForm(t, '/tasks/echo/pause', { csrf }, { cookie });
  expect(res.status).toBe(303);
  expect(res.headers.get('location')).toBe('/tasks?notice=paused&task=echo');
  expect(await paused('echo')).toBe('paused');
  const after = await (await getPage(t, res.headers.get('location')!, cookie)).text();
  expect(after).toContain('data-task="echo" data-state="paused"');
  expect(after).toContain('action="/tasks/echo/resume"');
  expect(after).toMatch(/Task <strong>echo<\/strong> is paused/);

  await t.skiplock.tick({ untilIdle: true });
  expect((await t.skiplock.getJob(job.id))!.status).toBe('QUEUED');
  const jobPage = await (await getPage(t, `/jobs/${job.id}`, cookie)).text();
  expect(jobPage).toMatch(/Waiting: its task <a href="\/tasks">echo<\/a> is paused/);
  // The Run card's Waiting field agrees (it said "due" for a paused task).
  expect(jobPage).toContain('<dt>Waiting</dt><dd>its task is paused: no tick claims it until the task is resumed</dd>');

  expect((await postForm(t, '/tasks/echo/resume', { csrf }, { cookie })).status).toBe(303);
  expect(await paused('echo')).toBe('active');
  await t.skiplock.tick({ untilIdle: true });
  expect((await t.skiplock.getJob(job.id))!.status).toBe('DONE');
  // A name that cannot be a task: back to the page, nothing paused.
  expect((await postForm(t, `/tasks/${'x'.repeat(201)}/pause`, { csrf }, { cookie })).headers.get('location')).toBe('/tasks');
});

test('"Run now" on a delayed job makes it due; the button is only on delayed and retry-waiting jobs', async () => {
  const job = await t.skiplock.enqueue({ task: 'echo', payload: { message: 'later' }, delayMs: 3_600_000 });
  const page = await (await getPage(t, `/jobs/${job.id}`, cookie)).text();
  expect(page).toContain(`action="/jobs/${job.id}/run-now"`);
  expect(page).toMatch(/Waiting: it is delayed until/);
  const csrf = await csrfOf(t, cookie, `/jobs/${job.id}`);
  expect((await postForm(t, `/jobs/${job.id}/run-now`, {}, { cookie })).status).toBe(403);
  expect((await t.skiplock.getJob(job.id))!.runAt.getTime()).toBe(job.runAt.getTime());
  const res = await postForm(t, `/jobs/${job.id}/run-now`, { csrf, return_to: `/jobs/${job.id}` }, { cookie });
  expect(res.status).toBe(303);
  expect(res.headers.get('location')).toBe(`/jobs/${job.id}?notice=run-now&job=${job.id}`);
  const due = await t.skiplock.getJob(job.id);
  expect(due!.runAt.getTime()).toBeLessThanOrEqual((await t.skiplock.currentTime()).getTime());
  const now = await (await getPage(t, res.headers.get('location')!, cookie)).text();
  expect(now).toMatch(/is due now/);
  expect(now).not.toContain(`action="/jobs/${job.id}/run-now"`);
  await t.skiplock.tick({ untilIdle: true });
  const late = await postForm(t, `/jobs/${job.id}/run-now`, { csrf }, { cookie });
  expect(late.headers.get('location')).toBe(`/jobs/${job.id}?notice=conflict&job=${job.id}`);
});

test('a debounced job says so', async () => {
  const job = await t.skiplock.enqueue({ task: 'echo', payload: { message: 'd' }, debounce: { key: 'user-<7>', delayMs: 60_000 } });
  const page = await (await getPage(t, `/jobs/${job.id}`, cookie)).text();
  expect(page).toContain('it is debounced (key <code>user-&lt;7&gt;</code>)');
  expect((await (await getPage(t, '/tasks', cookie)).text())).toMatch(/data-task="echo"[\s\S]*?<td class="num">1<\/td>\s*<td class="num"><form/);
});
