/** The dashboard's versions and bulk actions: the overview's warning of jobs nothing here can run, "retry / cancel all N matching" with its confirmation, restart from a step. */
import { afterAll, beforeAll, expect, test } from 'vitest';
import { z } from 'zod';
import { defineTask } from '../../src/index.ts';
import { statement } from '../../src/store/sql.ts';
import { exampleTasks } from '../../src/tasks/examples.ts';
import { csrfOf, getPage, logIn, postForm } from './dashboard-support.ts';
import { createTestApp, type TestApp } from './helpers.ts';

const stepped = defineTask({
  name: 'stepped',
  payload: z.object({}),
  handler: async (_p, ctx) => {
    await ctx.step('a', () => 1);
    await ctx.sleep('wait', 3600_000);
  },
});

let t: TestApp;
let cookie: string;
beforeAll(async () => {
  t = await createTestApp({ tasks: [...exampleTasks, stepped] });
  cookie = await logIn(t);
});
afterAll(() => t.close());

test('the overview warns of jobs of a task this deployment does not register', async () => {
  await t.db.sql.query(statement(`INSERT INTO skiplock.job (task) SELECT 'old-name' FROM generate_series(1, 2)`));
  const html = await (await getPage(t, '/', cookie)).text();
  expect(html).toContain('2 jobs nothing here can run');
  expect(html).toContain('old-name');
});

test('retry all matching: the confirmation shows the count, the action changes them', async () => {
  for (let i = 0; i < 3; i++) await t.skiplock.enqueue({ task: 'poison', payload: {} });
  await t.skiplock.tick({ untilIdle: true });
  const list = await (await getPage(t, '/jobs?status=DEAD&task=poison', cookie)).text();
  expect(list).toContain('Retry all matching');
  const confirm = await (await getPage(t, '/jobs/bulk?action=retry&status=DEAD&task=poison', cookie)).text();
  expect(confirm).toContain('Retry 3 jobs');
  const csrf = await csrfOf(t, cookie, '/jobs/bulk?action=retry&status=DEAD&task=poison');
  const res = await postForm(t, '/jobs/bulk', { csrf, action: 'retry', status: 'DEAD', task: 'poison' }, { cookie });
  expect(res.status).toBe(303);
  expect(res.headers.get('location')).toContain('notice=bulk-retried');
  const [row] = await t.db.sql.query(statement(`SELECT count(*)::int AS n FROM skiplock.job WHERE task = 'poison' AND status = 'QUEUED'`));
  expect(row!.n).toBe(3);
});

test('restart from a step on the job page: for a DEAD or CANCELLED job; the same form sent twice restarts once', async () => {
  const job = await t.skiplock.enqueue({ task: 'stepped', payload: {} });
  await t.skiplock.tick({ untilIdle: true });
  // Sleeping (live): no form.
  expect(await (await getPage(t, `/jobs/${job.id}`, cookie)).text()).not.toContain('Restart from a step');
  await t.skiplock.cancelJob(job.id);
  const page = await (await getPage(t, `/jobs/${job.id}`, cookie)).text();
  expect(page).toContain('Restart from a step');
  const csrf = await csrfOf(t, cookie, `/jobs/${job.id}`);
  const res = await postForm(t, `/jobs/${job.id}/restart`, { csrf, from_step: 'wait' }, { cookie });
  expect(res.headers.get('location')).toContain('notice=restarted');
  expect(await t.skiplock.getJob(job.id)).toMatchObject({ status: 'QUEUED', stepCount: 1 });
  const twice = await postForm(t, `/jobs/${job.id}/restart`, { csrf, from_step: 'wait' }, { cookie });
  expect(twice.headers.get('location')).toContain('notice=conflict');
  expect(await t.skiplock.getJob(job.id)).toMatchObject({ status: 'QUEUED', stepCount: 1 });
});
