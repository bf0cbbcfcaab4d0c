/**
 * The bundled durable workflow (src/tasks/examples.ts, `signup-workflow`) end to end on a real
 * skiplock, time injected: create the account, sleep (no invocation held: the job is WAITING until
 * it wakes), send the e-mail, fan out to three `notify` children, join. The "Done when".
 */
import { afterAll, beforeAll, expect, test } from 'vitest';
import { createApp } from '../../src/http/app.ts';
import { createSkiplock } from '../../src/runtime/skiplock.ts';
import { exampleTasks } from '../../src/tasks/examples.ts';
import { createTestDb, type TestDb } from '../support/db.ts';

let db: TestDb;
beforeAll(async () => (db = await createTestDb()));
afterAll(() => db.drop());

const T0 = Date.parse('2026-12-01T12:00:00.000Z');
const TICK = { untilIdle: true, budgetMs: 20_000, pollIntervalMs: 10 } as const;

test('signup-workflow: every step once, the sleep in the queue, three children fanned out and joined', async () => {
  let t = T0;
  const skiplock = createSkiplock({ sql: db.sql, tasks: exampleTasks, log: () => {}, now: () => new Date(t) });
  const job = await skiplock.enqueue({ task: 'signup-workflow', payload: { email: 'ada@example.com', waitMs: 2000 } });

  // First tick: the account, then the sleep: the job leaves the invocation, WAITING until it wakes.
  await skiplock.tick(TICK);
  const sleeping = (await skiplock.getJobDetail(job.id))!;
  expect(sleeping).toMatchObject({ status: 'WAITING', stepCount: 2, pendingChildren: 0 });
  expect(sleeping.steps.map((s) => [s.id, s.kind, s.status])).toEqual([
    ['create-account', 'step', 'done'],
    ['wait-a-day', 'sleep', 'sleeping'],
  ]);
  expect(sleeping.steps[1]!.wakeAt).toEqual(new Date(T0 + 2000));
  expect(sleeping.runAt).toEqual(new Date(T0 + 2000));
  const userId = (sleeping.steps[0]!.output as { userId: string }).userId;

  // Not due yet: nothing is claimed.
  t = T0 + 1999;
  expect((await skiplock.tick(TICK)).claimed).toBe(0);

  // Due: it resumes, sends the e-mail, invokes the three children (WAITING), they run, the last
  // one's end wakes it, and it joins. A few ticks at most.
  t = T0 + 2000;
  for (let i = 0; i < 10 && (await skiplock.getJob(job.id))!.status !== 'DONE'; i += 1) await skiplock.tick(TICK);

  const done = (await skiplock.getJobDetail(job.id))!;
  expect(done.status).toBe('DONE');
  expect(done.result).toEqual({ userId, welcomeMessageId: `skiplock:${job.id}:send-welcome-email`, notified: ['crm', 'analytics', 'billing'] });
  expect(done.pendingChildren).toBe(0);
  expect(done.steps.map((s) => [s.seq, s.id, s.kind, s.status])).toEqual([
    [0, 'create-account', 'step', 'done'],
    [1, 'wait-a-day', 'sleep', 'done'],
    [2, 'send-welcome-email', 'step', 'done'],
    [3, 'notify-crm', 'invoke', 'done'],
    [4, 'notify-analytics', 'invoke', 'done'],
    [5, 'notify-billing', 'invoke', 'done'],
    [6, 'join', 'step', 'done'],
  ]);
  // Each step's fn ran once; the account kept its id across the sleep.
  expect(done.steps.filter((s) => s.kind === 'step').every((s) => s.attempts === 1)).toBe(true);
  expect(done.steps[0]!.output).toEqual({ userId, email: 'ada@example.com' });
  // The attempt history says how each run left: asleep, waiting for its children, then done.
  expect(done.history.map((h) => h.outcome)).toEqual(['sleeping', 'waiting', 'done']);
  expect(done.attempts).toBe(1);
  // Each invoke names its child, whose result is the step's output.
  expect(done.children.map((c) => [c.task, c.status, c.parentStep])).toEqual([
    ['notify', 'DONE', 'notify-crm'],
    ['notify', 'DONE', 'notify-analytics'],
    ['notify', 'DONE', 'notify-billing'],
  ]);
  for (const step of done.steps.filter((s) => s.kind === 'invoke')) {
    const child = done.children.find((c) => c.id === step.childId)!;
    expect(child.parentStep).toBe(step.id);
    expect(step.childTask).toBe('notify');
    expect(step.output).toEqual({ service: step.id.replace('notify-', ''), notifiedAt: expect.any(String) });
    expect(await skiplock.getJob(child.id)).toMatchObject({ parentId: job.id, parentStep: step.id, result: step.output });
  }

  // The HTTP API shows the same.
  const app = createApp({ skiplock, apiToken: 'workflow-token-0123456789', cronSecret: 'workflow-cron-0123456789' });
  const res = await app.request(`/v1/jobs/${job.id}`, { headers: { authorization: 'Bearer workflow-token-0123456789' } });
  const { job: json } = (await res.json()) as { job: { steps: { id: string }[]; children: unknown[]; result: unknown } };
  expect(json.steps.map((s) => s.id)).toEqual(done.steps.map((s) => s.id));
  expect(json.children).toHaveLength(3);
  expect(json.result).toEqual(done.result);
});
