/**
 * The bundled example tasks (CONTRACT.md) and schedule, deployed through src/tasks/index.ts by
 * `npm start`, the Worker, the Vercel function and the Node runner. Small on purpose: each shows
 * one behaviour.
 */
import * as z from 'zod';
import { defineSchedule, defineTask, PermanentError } from '../index.ts';

/** Returns its message: the smallest job that does something. */
export const echo = defineTask({
  name: 'echo',
  payload: z.object({ message: z.string() }),
  handler: ({ message }) => ({ message }),
});

/**
 * Waits `ms`, stopping early when its signal aborts (timeout, deadline, shutdown, cancel).
 * Its 20 s timeout fits every platform's tick (a tick claims no job whose timeout it cannot give);
 * enqueue longer sleeps with a larger `timeoutMs` on the Node runner.
 */
export const sleep = defineTask({
  name: 'sleep',
  payload: z.object({ ms: z.number().int().min(0).max(24 * 3600 * 1000) }),
  timeoutMs: 20_000,
  handler: ({ ms }, { signal }) =>
    new Promise<{ sleptMs: number }>((resolve, reject) => {
      if (signal.aborted) return reject(signal.reason);
      const started = Date.now();
      const timer = setTimeout(() => resolve({ sleptMs: Date.now() - started }), ms);
      signal.addEventListener('abort', () => {
        clearTimeout(timer);
        reject(signal.reason);
      }, { once: true });
    }),
});

/**
 * Fails (transiently) on attempts 1..failTimes, then succeeds: shows retries with a short
 * backoff (~1 s, then 2 s, 4 s, at most 5 s). 101 attempts, so any failTimes up to 100 ends in
 * success; enqueue it with a lower `maxAttempts` to see exhausted attempts end in DEAD.
 */
export const flaky = defineTask({
  name: 'flaky',
  payload: z.object({ failTimes: z.number().int().min(0).max(100) }),
  maxAttempts: 101,
  backoff: { baseMs: 1_000, jitter: 0.2, maxMs: 5_000 },
  handler: ({ failTimes }, { attempt }) => {
    if (attempt <= failTimes) throw new Error(`flaky: failing attempt ${attempt} of ${failTimes}`);
    return { attempts: attempt };
  },
});

/** Always fails permanently: DEAD on its first attempt, for a person to review. */
export const poison = defineTask({
  name: 'poison',
  payload: z.object({}),
  handler: () => {
    throw new PermanentError('poison: this job always fails permanently');
  },
});

/** Stands in for a call to another service: what the workflow below fans out to. */
export const notify = defineTask({
  name: 'notify',
  payload: z.object({ service: z.string().min(1).max(100), email: z.string() }),
  timeoutMs: 3_000,
  handler: ({ service }) => ({ service, notifiedAt: new Date().toISOString() }),
});

const DAY_MS = 24 * 3600 * 1000;

/**
 * A durable workflow (docs/steps.md): create the account, wait a day without holding an
 * invocation, send the welcome e-mail, tell three services at once (three child jobs), and join
 * their answers. Each step runs once, however many invocations the job takes; only the order and
 * ids of its steps must be the same on every run.
 */
export const signupWorkflow = defineTask({
  name: 'signup-workflow',
  payload: z.object({ email: z.string().min(3).max(320), waitMs: z.number().int().min(0).max(30 * DAY_MS).default(DAY_MS) }),
  // Each run is a few quick steps, however long the workflow: a short timeout lets any tick with
  // 3 s left claim it (a tick claims only jobs whose timeout fits in what is left of its budget).
  timeoutMs: 3_000,
  handler: async ({ email, waitMs }, ctx) => {
    // Random ids and clocks go inside steps: their results are stored, so a rerun sees the same.
    const account = await ctx.step('create-account', () => ({ userId: crypto.randomUUID(), email }));
    await ctx.sleep('wait-a-day', waitMs);
    const welcome = await ctx.step('send-welcome-email', ({ idempotencyKey }) => ({ to: email, messageId: idempotencyKey }));
    const notified = await Promise.all(
      ['crm', 'analytics', 'billing'].map((service) => ctx.invoke<{ service: string; notifiedAt: string }>(`notify-${service}`, 'notify', { service, email })),
    );
    return ctx.step('join', () => ({ userId: account.userId, welcomeMessageId: welcome.messageId, notified: notified.map((n) => n.service) }));
  },
});

/**
 * A workflow that waits for the outside world (docs/steps.md, "Events"): it resumes when
 * `POST /v1/events {"name": "order.paid", "key": <orderId>}` arrives — also when it arrived first —
 * or after `timeoutMs` (default one day) with `paid: null`.
 */
export const awaitPayment = defineTask({
  name: 'await-payment',
  payload: z.object({ orderId: z.string().min(1).max(255), timeoutMs: z.number().int().min(0).max(30 * DAY_MS).default(DAY_MS) }),
  timeoutMs: 3_000,
  handler: async ({ orderId, timeoutMs }, ctx) => {
    const paid = await ctx.waitForEvent('paid', { event: 'order.paid', key: orderId, timeoutMs });
    return { orderId, paid };
  },
});

export const exampleTasks = [echo, sleep, flaky, poison, notify, signupWorkflow, awaitPayment];

/** Fires `echo` at the start of every minute (UTC): each firing runs once, however many ticks see it. */
export const exampleSchedules = [
  defineSchedule({ name: 'example-echo-every-minute', cron: '* * * * *', task: echo, payload: { message: 'fired by the example schedule' } }),
];
