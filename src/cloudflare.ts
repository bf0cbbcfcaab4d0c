/**
 * `skiplock/cloudflare`: the queue as a Cloudflare Worker.
 *
 *   import { createWorker } from 'skiplock/cloudflare';
 *   const worker = createWorker({ tasks, schedules });
 *   export default worker;                          // fetch (HTTP API, dashboard) + scheduled (minute cron)
 *   export const SkiplockTicker = worker.Ticker;    // the Durable Object ticker (TICKER = "alarm")
 *
 * Reads DATABASE_URL, API_TOKEN, CRON_SECRET and the TICK_* variables from the Worker's env.
 */
export { createWorker, type SkiplockWorker } from './platform/cloudflare/worker.ts';
export type { Env, WorkerOptions } from './platform/cloudflare/deployment.ts';
export type { TickerClass } from './platform/cloudflare/ticker.ts';
export type { DurableObjectNamespace, DurableObjectState, ExecutionContext, ScheduledController } from './platform/cloudflare/runtime-types.ts';
