// The queue of this app: its tasks, its schedule, and the route handlers that serve it.
import * as vercelQueue from '@vercel/queue';
import { defineSchedule, defineTask } from 'skiplock';
import { createNextHandlers } from 'skiplock/vercel';
import * as z from 'zod';
import { fakeAnswer } from './fake-model';

const DAY_MS = 24 * 3600 * 1000;

export const sendWelcome = defineTask({
  name: 'send-welcome',
  payload: z.object({ email: z.string().email() }),
  handler: async ({ email }) => ({ sent: email }),
});

/** A workflow: welcome now, a follow-up `waitMs` later (a day by default); the sleep holds no invocation. */
export const onboarding = defineTask({
  name: 'onboarding',
  payload: z.object({ email: z.string().email(), waitMs: z.number().int().min(0).max(30 * DAY_MS).default(DAY_MS) }),
  timeoutMs: 5_000,
  handler: async ({ email, waitMs }, ctx) => {
    const welcome = await ctx.step('welcome', () => ({ sentAt: new Date().toISOString() }));
    await ctx.sleep('wait', waitMs);
    const followUp = await ctx.step('follow-up', () => ({ sentAt: new Date().toISOString() }));
    return { email, welcomedAt: welcome.sentAt, followedUpAt: followUp.sentAt };
  },
});

export const dailyReport = defineTask({
  name: 'daily-report',
  payload: z.object({}),
  handler: async () => ({ reportedAt: new Date().toISOString() }),
});

/**
 * Streams an answer chunk by chunk (docs/streams.md): each token is written to the job's stream
 * as it comes (buffered, stored within 100 ms), and the page at /ask shows it as it arrives.
 */
export const answer = defineTask({
  name: 'answer',
  payload: z.object({ question: z.string().min(1).max(500) }),
  // An answer takes seconds, well within a tick of this function (maxDuration 60 s).
  timeoutMs: 20_000,
  handler: async ({ question }, ctx) => {
    const out = ctx.stream();
    let text = '';
    for await (const token of fakeAnswer(question, { signal: ctx.signal })) {
      out.write(token);
      text += token;
    }
    return { answer: text };
  },
});

export const tasks = [sendWelcome, onboarding, dailyReport, answer];

/**
 * Served at /api/skiplock/* (app/api/skiplock/[[...path]]/route.ts). Work due later (a `runAt`, a
 * retry's backoff, `ctx.sleep`) starts at its instant through Vercel Queues: vercel.json maps the
 * topic `skiplock-wake` to that route. vercel.json's cron calls /api/skiplock/v1/tick as the safety net.
 */
export const skiplockRoutes = createNextHandlers({
  tasks,
  schedules: [defineSchedule({ name: 'daily-report', cron: '0 6 * * *', task: dailyReport })],
  maxDuration: 60,
  queue: { sdk: vercelQueue },
});
