// The queue of this app: its tasks, its schedule, and the route handlers that serve it.
import { defineSchedule, defineTask } from 'skiplock';
import { createNextHandlers } from 'skiplock/vercel';
import * as z from 'zod';

export const sendWelcome = defineTask({
  name: 'send-welcome',
  payload: z.object({ email: z.string().email() }),
  handler: async ({ email }) => ({ sent: email }),
});

export const dailyReport = defineTask({
  name: 'daily-report',
  payload: z.object({}),
  handler: async () => ({ reportedAt: new Date().toISOString() }),
});

export const tasks = [sendWelcome, dailyReport];

/** Served at /api/skiplock/* (app/api/skiplock/[[...path]]/route.ts); vercel.json's cron calls /api/skiplock/v1/tick. */
export const skiplockRoutes = createNextHandlers({
  tasks,
  schedules: [defineSchedule({ name: 'daily-report', cron: '0 6 * * *', task: dailyReport })],
  maxDuration: 60,
});
