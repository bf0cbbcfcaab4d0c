/**
 * `skiplock/vercel`: the queue on Vercel, as a Vercel Function or a Next.js App Router route.
 *
 *   // api/skiplock.ts (Vercel Function; vercel.json routes /(.*) here and crons /v1/tick)
 *   import { createVercelHandler } from 'skiplock/vercel';
 *   export const config = { maxDuration: 60 };
 *   export default createVercelHandler({ tasks, schedules, maxDuration: 60 });
 *
 *   // app/api/skiplock/[[...path]]/route.ts (Next.js; vercel.json crons /api/skiplock/v1/tick)
 *   import { createNextHandlers } from 'skiplock/vercel';
 *   export const maxDuration = 60;
 *   export const { GET, POST, PUT, PATCH, DELETE } = createNextHandlers({ tasks, schedules, maxDuration: 60 });
 *
 *   // Vercel's timer (work due later starts on time with no cron): Vercel Queues
 *   import * as vercelQueue from '@vercel/queue';
 *   createNextHandlers({ tasks, schedules, maxDuration: 60, queue: { sdk: vercelQueue } });
 */
export {
  createNextHandlers,
  createVercelHandler,
  type NextHandlers,
  type RouteHandler,
  type VercelEnv,
  type VercelHandler,
  type VercelOptions,
  type VercelQueueOptions,
  type VercelQueueSdk,
} from './platform/vercel/index.ts';
