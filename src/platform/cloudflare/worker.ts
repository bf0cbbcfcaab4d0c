/**
 * The Cloudflare Worker (skiplock/cloudflare's createWorker): the HTTP API on `fetch` (an
 * enqueue starts a tick with waitUntil), and the tick on the minute cron (`scheduled`), which
 * keeps ticking for TICK_BUDGET_MS so a job that becomes due mid-minute starts within about a
 * second. Budgets and limits: deployment.ts.
 */
import { isUnder, normalizeBasePath } from '../../http/mount.ts';
import { isNotMigrated } from '../../runtime/schema-check.ts';
import type { Skiplock } from '../../runtime/skiplock.ts';
import type { TaskList } from '../../runtime/task-types.ts';
import { createDeployments, wakeTicker, type Env, type WorkerOptions } from './deployment.ts';
import type { ExecutionContext, ScheduledController } from './runtime-types.ts';
import { createTickerClass, type TickerClass } from './ticker.ts';

export interface SkiplockWorker<Tasks extends TaskList = TaskList> {
  /** The HTTP API and dashboard (under `basePath` when set; other paths get 404). */
  fetch(request: Request, env: Env, ctx: ExecutionContext): Response | Promise<Response>;
  /** The minute cron: ticks (or, with TICKER = "alarm", wakes the Durable Object). */
  scheduled(controller: ScheduledController, env: Env, ctx?: ExecutionContext): Promise<void>;
  /** Whether `fetch` serves this request (its path is under `basePath`), for composing with your own fetch. */
  handles(request: Request): boolean;
  /** The queue of this env (one per isolate), to enqueue from your own code: `worker.skiplock(env).enqueue(...)`. */
  skiplock(env: Env): Skiplock<Tasks>;
  /**
   * The Durable Object ticker class; export it from your Worker module under the name your
   * wrangler.toml binds (`export const SkiplockTicker = worker.Ticker`). Only used with TICKER = "alarm".
   */
  Ticker: TickerClass;
}

export function createWorker<const Tasks extends TaskList>(options: WorkerOptions<Tasks>): SkiplockWorker<Tasks> {
  const deploymentFor = createDeployments(options);
  const basePath = normalizeBasePath(options.basePath);
  return {
    fetch(request, env, ctx) {
      return deploymentFor(env).http.fetch(request, env, ctx);
    },
    async scheduled(_controller, env) {
      const { skiplock, cronTick, alarmMode } = deploymentFor(env);
      // In alarm mode the Durable Object ticks; the cron only makes sure it is awake.
      if (alarmMode) await wakeTicker(env);
      // not_migrated: the tick logged it once for this isolate; a failed invocation a minute adds nothing.
      else await skiplock.tick(cronTick).catch((error: unknown) => { if (!isNotMigrated(error)) throw error; });
    },
    handles: (request) => isUnder(new URL(request.url).pathname, basePath),
    skiplock: (env) => deploymentFor(env).skiplock,
    Ticker: createTickerClass(deploymentFor),
  };
}
