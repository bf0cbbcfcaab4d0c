/**
 * A job whose timeout no tick of this deployment can fit would wait forever: with the app's
 * maxJobTimeoutMs, an enqueue of one is refused (400), and the dashboard shows those already queued.
 */
import { afterAll, beforeAll, expect, test } from 'vitest';
import { z } from 'zod';
import { defineTask } from '../../src/runtime/tasks/task.ts';
import { exampleTasks } from '../../src/tasks/examples.ts';
import { getPage, logIn } from './dashboard-support.ts';
import { createTestApp, type TestApp } from './helpers.ts';

const slowByDefault = defineTask({ name: 'slow-default', payload: z.object({}), timeoutMs: 60_000, handler: () => null });

let t: TestApp;
beforeAll(async () => (t = await createTestApp({ tasks: [...exampleTasks, slowByDefault], app: { maxJobTimeoutMs: 29_000 } })));
afterAll(() => t.close());

const enqueue = (body: unknown) => t.call('POST', '/v1/jobs', { body });

test('an enqueue whose timeoutMs is over the deployment\'s longest tick is refused, naming the budget', async () => {
  const res = await enqueue({ task: 'echo', payload: { message: 'x' }, timeoutMs: 29_001 });
  expect(res.status).toBe(400);
  const body = await res.json();
  expect(body).toEqual({
    error: {
      code: 'invalid_request',
      message: 'timeoutMs 29001 is longer than any tick of this deployment can run (29000 ms): the job would never be claimed',
      issues: [{ path: ['timeoutMs'], message: 'at most 29000 here' }],
    },
  });
  expect(await t.countJobs()).toBe(0);
  // Exactly the budget fits.
  expect((await enqueue({ task: 'echo', payload: { message: 'x' }, timeoutMs: 29_000 })).status).toBe(201);
});

test("the task's own timeoutMs counts when the job gives none", async () => {
  const res = await enqueue({ task: 'slow-default' });
  expect(res.status).toBe(400);
  expect(((await res.json()) as any).error.message).toContain('timeoutMs 60000 is longer than any tick of this deployment can run (29000 ms)');
  expect((await enqueue({ task: 'slow-default', timeoutMs: 20_000 })).status).toBe(201);
});

test('a batch with one such job is refused whole, the issue at its index', async () => {
  const before = await t.countJobs();
  const res = await t.call('POST', '/v1/jobs/batch', {
    body: { jobs: [{ task: 'echo', payload: { message: 'a' } }, { task: 'echo', payload: { message: 'b' }, timeoutMs: 3_600_000 }] },
  });
  expect(res.status).toBe(400);
  expect(((await res.json()) as any).error).toMatchObject({ code: 'invalid_request', issues: [{ path: ['jobs', 1, 'timeoutMs'], message: 'at most 29000 here' }] });
  expect(await t.countJobs()).toBe(before);
});

test('other refusals keep their code: an unknown task is still unknown_task', async () => {
  const res = await enqueue({ task: 'nope', timeoutMs: 3_600_000 });
  expect(res.status).toBe(400);
  expect(((await res.json()) as any).error.code).toBe('unknown_task');
});

test('the dashboard shows the queued jobs no tick here can claim (enqueued through the library, say)', async () => {
  const cookie = await logIn(t);
  expect(await (await getPage(t, '/', cookie)).text()).not.toContain('can never be claimed here');
  await t.skiplock.enqueue({ task: 'echo', payload: { message: 'too long' }, timeoutMs: 120_000 });
  await t.skiplock.enqueue({ task: 'slow-default' });
  const html = await (await getPage(t, '/', cookie)).text();
  expect(html).toContain('<strong>2 jobs can never be claimed here</strong>');
  expect(html).toContain('their timeoutMs is over 29 s');
});
