import { defineSchedule, defineTask, PermanentError } from 'skiplock';
import * as z from 'zod';

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

export const tasks = [sendWelcome, cleanup];

export const schedules = [defineSchedule({ name: 'nightly-cleanup', cron: '0 3 * * *', tz: 'UTC', task: cleanup, payload: { olderThanDays: 30 } })];
