/**
 * skiplock/vercel: the HTTP API as a Vercel Function (Node.js runtime) or as Next.js App Router
 * route handlers. A Vercel cron calls GET <basePath>/v1/tick with `Authorization: Bearer
 * $CRON_SECRET` (cron.ts: it consults the wake state in the Runtime Cache, wake-store.ts, and
 * makes no statement when nothing is due; any other caller needs API_TOKEN and gets an explicit
 * tick). Each tick's budget comes from `maxDuration`;
 * the tick an enqueue starts runs on after the response through `waitUntil`
 * (@vercel/functions), within the same limit. Work due later (runAt, backoffs, sleeps, event
 * timeouts) waits for the cron, unless the `queue` option gives Vercel a timer: a Vercel Queues
 * message at each due instant (queue-timer.ts). Configuration from process.env: DATABASE_URL,
 * API_TOKEN, CRON_SECRET, TICK_*, SKIPLOCK_QUEUE_* (read on the first request).
 */
import { waitUntil } from '@vercel/functions';
import { createAppOrNotice, longestJobTimeoutMs } from '../../http/app.ts';
import { mount, type Mounted } from '../../http/mount.ts';
import { createTokenGuard } from '../../http/auth.ts';
import { platformSource } from '../../http/token-throttle.ts';
import { createSkiplock, type Skiplock, type SkiplockConfig } from '../../runtime/skiplock.ts';
import type { TaskList } from '../../runtime/tasks/index.ts';
import { createNeonHttpDriver } from '../../store/drivers/neon-http.ts';
import type { Sql } from '../../store/sql.ts';
import type { TickOptions } from '../../runtime/tick/index.ts';
import { createBackgroundTicks, type WakeDriver } from '../../runtime/wake/index.ts';
import { WAKE_EARLY_MS, type WakeStore } from '../../runtime/wake/index.ts';
import { callbacksFromEnv, ConfigError, idleCheckMsFromEnv, intFromEnv, streamConnectionMsFromEnv, streamTokensFromEnv, tickOptionsFromEnv, type CallbackEnv, type StreamEnv } from '../env-options.ts';
import { createVercelCron } from './cron.ts';
import { createQueueTimer, lowersInstant, type QueueTimer, type VercelQueueEnv, type VercelQueueOptions } from './queue-timer.ts';
import { createRuntimeCacheWakeStore, wakeStateKey } from './wake-store.ts';

export type { VercelQueueOptions, VercelQueueSdk } from './queue-timer.ts';

/** The variables the handlers read (process.env). */
export interface VercelEnv extends CallbackEnv, StreamEnv, VercelQueueEnv {
  DATABASE_URL?: string;
  API_TOKEN?: string;
  CRON_SECRET?: string;
  METRICS_TOKEN?: string;
  TICK_BUDGET_MS?: string;
  TICK_CONCURRENCY?: string;
  TICK_POLL_INTERVAL_MS?: string;
  /** The longest an idle deployment goes without a database check, in ms (0: never). Default one hour. */
  IDLE_CHECK_MS?: string;
  /** Invocations a backlog may fan out to, the cron's own included. Default 4 (DEFAULT_MAX_PARALLEL_TICKS). */
  MAX_PARALLEL_TICKS?: string;
  /** Local development only: Neon's HTTP endpoint, pointed at the local Neon proxy. */
  NEON_FETCH_ENDPOINT?: string;
  [name: string]: string | undefined;
}

export interface VercelOptions<Tasks extends TaskList = TaskList> extends Omit<SkiplockConfig<Tasks>, 'sql'> {
  /**
   * The function's maxDuration in seconds — declare the same number to Vercel (`export const
   * config = { maxDuration }`, or Next's `export const maxDuration`). Ticks get it minus 5 s. Default 60.
   */
  maxDuration?: number;
  /** Serve under this path prefix, e.g. '/api/skiplock' for app/api/skiplock/[[...path]]/route.ts. Default: none. */
  basePath?: string;
  /** The database port. Default: createNeonHttpDriver(DATABASE_URL). */
  sql?: (env: VercelEnv) => Sql;
  /** Where configuration is read from. Default: process.env. */
  env?: VercelEnv;
  /**
   * How many invocations a backlog may run at once: a cron tick whose claim fills every slot calls
   * its own tick route this many times minus one (MAX_PARALLEL_TICKS overrides). 1 turns it off. Default 4.
   */
  maxParallelTicks?: number;
  /**
   * Vercel's timer: a Vercel Queues message at each instant work is due later, to this function
   * (vercel.json: `"functions": { "<this file>": { "experimentalTriggers": [{ "type":
   * "queue/v2beta", "topic": "skiplock-wake" }] } }`). `{ sdk }` is the `@vercel/queue` module.
   * Without it, work due later starts at the next cron invocation (docs/platforms.md).
   */
  queue?: VercelQueueOptions;
}

/** maxParallelTicks when neither the option nor MAX_PARALLEL_TICKS sets it. */
export const DEFAULT_MAX_PARALLEL_TICKS = 4;

export interface VercelHandler<Tasks extends TaskList = TaskList> {
  /** The Vercel Function's handler: `export default handler` (it has `fetch`). */
  fetch(request: Request): Promise<Response>;
  /** The queue the handler uses (built on first use), to enqueue from your own code. */
  skiplock(): Skiplock<Tasks>;
  /** What Vercel reads from the function module: `export const config = handler.config` is NOT read statically; write the literal. */
  readonly config: { maxDuration: number };
}

export type RouteHandler = (request: Request) => Promise<Response>;

/** App Router route handlers: `export const { GET, POST, PUT, PATCH, DELETE } = createNextHandlers({ tasks, ... })`. */
export interface NextHandlers<Tasks extends TaskList = TaskList> {
  GET: RouteHandler;
  HEAD: RouteHandler;
  POST: RouteHandler;
  PUT: RouteHandler;
  PATCH: RouteHandler;
  DELETE: RouteHandler;
  skiplock(): Skiplock<Tasks>;
}

// Room for a cold start and the response, kept out of the tick's budget.
const HEADROOM_MS = 5_000;

/** A Vercel Function (Node.js runtime) serving the HTTP API, dashboard and cron tick route. */
export function createVercelHandler<const Tasks extends TaskList>(options: VercelOptions<Tasks>): VercelHandler<Tasks> {
  const maxDuration = options.maxDuration ?? 60;
  let built: Built<Tasks> | undefined;
  const build = () => (built ??= buildFromEnv(options, maxDuration));
  return {
    async fetch(request) {
      const arrivedAt = performance.now();
      const { http, cron, timer } = build();
      if (timer?.isCallback(request)) return timer.handle(request);
      return (await cron(request, arrivedAt)) ?? http.fetch(request);
    },
    skiplock: () => build().skiplock,
    config: { maxDuration },
  };
}

/** Route handlers for a Next.js App Router catch-all route. Default basePath '/api/skiplock'. */
export function createNextHandlers<const Tasks extends TaskList>(options: VercelOptions<Tasks>): NextHandlers<Tasks> {
  const handler = createVercelHandler<Tasks>({ basePath: '/api/skiplock', ...options });
  const route: RouteHandler = (request) => handler.fetch(request);
  return { GET: route, HEAD: route, POST: route, PUT: route, PATCH: route, DELETE: route, skiplock: handler.skiplock };
}

/**
 * Work due now: a tick after the response (waitUntil), one chain per instance, from the user's own
 * route as from the HTTP API. Work due later: with the Queues timer, a message at its instant
 * when it lowers the earliest one known (sent within the invocation: waitUntil); without it, the
 * cron finds it. The wake state is the Runtime Cache (best effort).
 */
function vercelWakeDriver(skiplock: Skiplock, tick: TickOptions, store: WakeStore, timer: QueueTimer | undefined): WakeDriver {
  const background = createBackgroundTicks(() => skiplock.tickIfDue({ ...tick, untilIdle: true, store, force: true }), (_level, message, fields) => console.error(`[skiplock] ${message}`, fields));
  return {
    store,
    onDueWork(atMs) {
      if (atMs > Date.now() + WAKE_EARLY_MS) {
        if (!timer) return undefined;
        const armed = store.read().catch(() => null).then((state) => (lowersInstant(state, atMs) ? timer.arm(atMs) : undefined));
        waitUntil(armed);
        return armed;
      }
      const work = background();
      waitUntil(work);
      return work;
    },
  };
}

/** How long a push waits for its instant when it comes early (the delay is rounded up, so it rarely does). */
const QUEUE_EARLY_WINDOW_MS = 2_000;

/**
 * The Queues timer's push: the signed instant lowers the wake state (a lower lost to a Runtime
 * Cache race comes back), then a tick as the cron's (nothing due: no statement), then the next
 * instant is armed (a hop re-arms its instant; a tick's conclusion already armed its own).
 */
function queueConsumer(skiplock: Skiplock, tick: TickOptions, store: WakeStore, timer: () => QueueTimer) {
  const marginMs = tick.marginMs ?? 1_000;
  const longestTaskTimeoutMs = Math.max(0, ...[...skiplock.tasks.values()].map((task) => task.timeoutMs));
  return async (atMs: number | null) => {
    if (atMs !== null) await store.lower(atMs);
    const waitWithinMs = Math.max(0, Math.min(QUEUE_EARLY_WINDOW_MS, (tick.budgetMs ?? 30_000) - marginMs - longestTaskTimeoutMs));
    const result = await skiplock.tickIfDue({ ...tick, untilIdle: true, store, waitWithinMs });
    // Not acknowledged: the Queue Service delivers the message again after its visibility timeout.
    if (result.ticked && !result.concluded) throw new Error('the tick could not learn when work is next due');
    const state = await store.read();
    if (state?.dueAt != null) await timer().arm(state.dueAt);
  };
}

/** Said once per instance when there is no timer: what starts work due later instead. */
export const NO_QUEUE_NOTICE =
  '[skiplock] no Vercel Queues timer (the `queue` option): work due later (runAt, retry backoffs, ctx.sleep, event timeouts) starts at the next cron invocation of /v1/tick — within a minute with `* * * * *` (Pro), up to a day on Hobby (one cron a day) — or when a write starts a tick. See docs/platforms.md, "Vercel".';

interface Built<Tasks extends TaskList> {
  skiplock: Skiplock<Tasks>;
  http: Mounted;
  cron: ReturnType<typeof createVercelCron>;
  timer: QueueTimer | undefined;
}

function buildFromEnv<Tasks extends TaskList>(options: VercelOptions<Tasks>, maxDuration: number): Built<Tasks> {
  const { maxDuration: _, basePath, sql: sqlFor, env: givenEnv, maxParallelTicks, queue, ...config } = options;
  const env = givenEnv ?? (process.env as VercelEnv);
  if (!sqlFor && !env.DATABASE_URL) throw new Error('DATABASE_URL is not set');
  if (!queue) {
    const set = (['SKIPLOCK_QUEUE_URL', 'SKIPLOCK_QUEUE_TOKEN', 'SKIPLOCK_QUEUE_TOPIC'] as const).filter((name) => env[name]);
    if (set.length > 0) throw new ConfigError(`${set.join(', ')} ${set.length > 1 ? 'are' : 'is'} set, but the handler has no \`queue\` option: pass \`queue: { sdk: vercelQueue }\` (import * as vercelQueue from '@vercel/queue') to give Vercel its timer`);
  }
  const sql = sqlFor?.(env) ?? createNeonHttpDriver(env.DATABASE_URL!, env.NEON_FETCH_ENDPOINT ? { fetchEndpoint: env.NEON_FETCH_ENDPOINT } : {});
  const skiplock = createSkiplock<Tasks>({ callbacks: callbacksFromEnv(env, basePath ?? ''), streamTokens: streamTokensFromEnv(env), ...config, sql, idleCheckMs: idleCheckMsFromEnv(env.IDLE_CHECK_MS, config.idleCheckMs) });
  const tick = tickOptionsFromEnv(env, { budgetMs: maxDuration * 1000 - HEADROOM_MS, pollIntervalMs: 1_000 });
  // The wake state in the Runtime Cache, one entry per database and task list (wake-store.ts).
  const stateKey = wakeStateKey(env.DATABASE_URL, [...skiplock.tasks.keys()], (config.schedules ?? []).map((s) => s.name));
  let timer: QueueTimer | undefined;
  const store = createRuntimeCacheWakeStore({ key: stateKey, ...(queue ? { onWrite: (state, written) => timer!.armState(state, written) } : {}) });
  if (queue) timer = createQueueTimer({ options: queue, env, stateKey, consume: queueConsumer(skiplock, tick, store, () => timer!) });
  else console.info(NO_QUEUE_NOTICE);
  skiplock.setWakeDriver(vercelWakeDriver(skiplock, tick, store, timer));
  const tokenGuard = createTokenGuard(platformSource('vercel'));
  const cron = createVercelCron({
    skiplock, tick, store, cronSecret: env.CRON_SECRET, basePath, tokenGuard, timer: timer !== undefined,
    maxParallelTicks: intFromEnv(env.MAX_PARALLEL_TICKS, maxParallelTicks ?? DEFAULT_MAX_PARALLEL_TICKS, 'MAX_PARALLEL_TICKS'),
  });
  // Without a usable API_TOKEN skiplock's routes answer 503 naming it; the project's other routes work.
  const app = createAppOrNotice({
    skiplock,
    apiToken: env.API_TOKEN ?? '',
    cronSecret: env.CRON_SECRET,
    metricsToken: env.METRICS_TOKEN,
    platform: 'vercel',
    tokenGuard,
    tick,
    maxJobTimeoutMs: longestJobTimeoutMs(tick), // every tick here has this budget: a longer job is refused at enqueue
    // A stream's connection ends before the function's duration; EventSource resumes with Last-Event-ID.
    streamConnectionMs: streamConnectionMsFromEnv(env) ?? Math.min(25_000, maxDuration * 1000 - HEADROOM_MS),
    // No runInBackground: every write that makes due work starts its tick through the wake driver.
  });
  return { skiplock, http: mount(app, basePath), cron, timer };
}
