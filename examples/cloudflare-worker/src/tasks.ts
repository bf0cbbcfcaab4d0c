import { defineSchedule, defineTask } from 'skiplock';
import * as z from 'zod';

export const resizeImage = defineTask({
  name: 'resize-image',
  payload: z.object({ key: z.string(), width: z.number().int().min(16).max(4096).default(800) }),
  timeoutMs: 20_000,
  handler: async ({ key, width }, { signal }) => {
    // Fetch the image, resize it, store it; pass `signal` to every fetch.
    signal.throwIfAborted();
    return { key, width };
  },
});

export const purgeUploads = defineTask({
  name: 'purge-uploads',
  payload: z.object({}),
  handler: async () => ({ purged: 0 }),
});

export const tasks = [resizeImage, purgeUploads];

export const schedules = [defineSchedule({ name: 'hourly-purge', every: '1h', task: purgeUploads })];
