/**
 * The Cloudflare Worker (skiplock/cloudflare's createWorker): the HTTP API on `fetch`; every
 * enqueue, wherever it is made, starts its tick in the background (waitUntil); the SkiplockTicker
 * Durable Object's alarm wakes at the next due instant; the minute cron (`scheduled`) is the
 * safety net and makes no statement while nothing is due. Budgets and limits: deployment.ts.
 */
import { isUnder, normalizeBasePath } from '../../http/mount.ts';
import { isNotMigrated } from '../../runtime/operations/index.ts';
import type { Skiplock } from '../../runtime/skiplock.ts';
import type { TaskList } from '../../runtime/tasks/index.ts';
import { createDeployments, type Env, type WorkerOptions } from './deployment.ts';
import { checkTicker } from './ticker-client.ts';
import type { ExecutionContext, ScheduledController } from './runtime-types.ts';
import { FAN_OUT_HEADER, serveFanOut } from './fan-out.ts';
import { createTickerClass, type TickerClass } from './ticker.ts';
import { loadWaitUntil, rememberContext } from './wait-until.ts';

/**
 * Cron mode: a minute invocation that knows something is due later in its minute waits for that
 * instant and ticks, rather than leaving it to the next minute (59 s: the next cron takes the rest).
 */
const CRON_WAIT_WITHIN_MS = 59_000;

export interface SkiplockWorker<Tasks extends TaskList = TaskList> {
  /** The HTTP API and dashboard (under `basePath` when set; other paths get 404). */
  fetch(request: Request, env: Env, ctx: ExecutionContext): Response | Promise<Response>;
  /**
   * The minute cron, a safety net: with the Durable Object, it makes sure its alarm is set (no
   * statement); with TICKER = "cron", it checks the database once (ticks until idle), then waits
   * inside its minute for any instant due in it (the isolate's wake state is not shared).
   */
  scheduled(controller: ScheduledController, env: Env, ctx?: ExecutionContext): Promise<void>;
  /** Whether `fetch` serves this request (its path is under `basePath`), for composing with your own fetch. */
  handles(request: Request): boolean;
  /** The queue of this env (one per isolate), to enqueue from your own code: `worker.skiplock(env).enqueue(...)`. */
  skiplock(env: Env): Skiplock<Tasks>;
  /**
   * The Durable Object ticker class; export it from your Worker module under the name your
   * wrangler.toml binds (`export const SkiplockTicker = worker.Ticker`). The default ticker; unused with TICKER = "cron".
   */
  Ticker: TickerClass;
}

export function createWorker<const Tasks extends TaskList>(options: WorkerOptions<Tasks>): SkiplockWorker<Tasks> {
  const deploymentFor = createDeployments(options);
  void loadWaitUntil();
  const basePath = normalizeBasePath(options.basePath);
  return {
    async fetch(request, env, ctx) {
      rememberContext(ctx);
      const deployment = deploymentFor(env);
      // A backlog's extra invocation, started by the Durable Object through SKIPLOCK_SELF (fan-out.ts).
      if (request.headers.has(FAN_OUT_HEADER)) {
        const answered = await serveFanOut(request, env, deployment);
        if (answered) return answered;
      }
      return deployment.http.fetch(request, env, ctx);
    },
    async scheduled(_controller, env, ctx) {
      rememberContext(ctx);
      const { skiplock, cronTick, alarmMode } = deploymentFor(env);
      if (alarmMode) await checkTicker(env);
      // Cron mode: the isolate's memory is no shared state (another isolate may have taken the
      // enqueue), so each minute checks the database once, then waits inside its minute for what it knows.
      // not_migrated: the tick logged it once for this isolate; a failed invocation a minute adds nothing.
      else await skiplock.tickIfDue({ ...cronTick, untilIdle: true, force: true, waitWithinMs: CRON_WAIT_WITHIN_MS }).catch((error: unknown) => {
        if (!isNotMigrated(error)) throw error;
      });
    },
    handles: (request) => isUnder(new URL(request.url).pathname, basePath),
    skiplock: (env) => deploymentFor(env).skiplock,
    Ticker: createTickerClass(deploymentFor),
  };
}
