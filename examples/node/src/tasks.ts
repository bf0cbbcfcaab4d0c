import { defineSchedule, defineTask, PermanentError } from 'skiplock';
import * as z from 'zod';
import { fakeAnswer } from './fake-model.js';

export const sendWelcome = defineTask({
  name: 'send-welcome',
  payload: z.object({ email: z.string().email(), name: z.string().optional() }),
  handler: async ({ email, name }, { idempotencyKey }) => {
    if (email.endsWith('@invalid.example')) throw new PermanentError(`cannot mail ${email}`);
    // Call your mail provider here, passing idempotencyKey so a retried job sends one mail.
    return { sent: email, greeting: `Welcome, ${name ?? email}!`, idempotencyKey };
  },
});

export const cleanup = defineTask({
  name: 'cleanup',
  payload: z.object({ olderThanDays: z.number().int().min(1).default(30) }),
  handler: ({ olderThanDays }) => ({ olderThanDays }),
});

/**
 * Streams an answer chunk by chunk (docs/streams.md): each token is written to the job's stream
 * as it comes (buffered, stored within 100 ms), and the page at /ask shows it as it arrives.
 */
export const answer = defineTask({
  name: 'answer',
  payload: z.object({ question: z.string().min(1).max(500) }),
  // Fits every platform's tick (a Worker's alarm tick gives 24 s); an answer takes seconds.
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

export const tasks = [sendWelcome, cleanup, answer];

export const schedules = [defineSchedule({ name: 'nightly-cleanup', cron: '0 3 * * *', tz: 'UTC', task: cleanup, payload: { olderThanDays: 30 } })];
