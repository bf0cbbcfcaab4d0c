/**
 * skiplock/vercel: the HTTP API as a Vercel Function (Node.js runtime) or as Next.js App Router
 * route handlers. A Vercel cron calls GET <basePath>/v1/tick with `Authorization: Bearer
 * $CRON_SECRET` (any other caller needs API_TOKEN). Each tick's budget comes from `maxDuration`;
 * the tick an enqueue starts runs on after the response through `waitUntil`
 * (@vercel/functions), within the same limit. Configuration from process.env: DATABASE_URL,
 * API_TOKEN, CRON_SECRET, TICK_* (read on the first request).
 */
import { waitUntil } from '@vercel/functions';
import { createAppOrNotice, longestJobTimeoutMs } from '../../http/app.ts';
import { mount, type Mounted } from '../../http/mount.ts';
import { createSkiplock, type Skiplock, type SkiplockConfig } from '../../runtime/skiplock.ts';
import type { TaskList } from '../../runtime/task-types.ts';
import { createNeonHttpDriver } from '../../store/drivers/neon-http.ts';
import type { Sql } from '../../store/sql.ts';
import type { TickOptions } from '../../runtime/tick.ts';
import { createBackgroundTicks, type WakeDriver } from '../../runtime/wake.ts';
import { createMemoryWakeStore, WAKE_EARLY_MS } from '../../runtime/wake-state.ts';
import { callbacksFromEnv, idleCheckMsFromEnv, tickOptionsFromEnv, type CallbackEnv } from '../env-options.ts';

/** The variables the handlers read (process.env). */
export interface VercelEnv extends CallbackEnv {
  DATABASE_URL?: string;
  API_TOKEN?: string;
  CRON_SECRET?: string;
  METRICS_TOKEN?: string;
  TICK_BUDGET_MS?: string;
  TICK_CONCURRENCY?: string;
  TICK_POLL_INTERVAL_MS?: string;
  /** The longest an idle deployment goes without a database check, in ms (0: never). Default one hour. */
  IDLE_CHECK_MS?: string;
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
}

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
  let built: { skiplock: Skiplock<Tasks>; http: Mounted } | undefined;
  const build = () => (built ??= buildFromEnv(options, maxDuration));
  return {
    async fetch(request) {
      return build().http.fetch(request);
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
 * route as from the HTTP API. The wake state is the instance's memory (best effort).
 */
function vercelWakeDriver(skiplock: Skiplock, tick: TickOptions): WakeDriver {
  const store = createMemoryWakeStore();
  const background = createBackgroundTicks(() => skiplock.tickIfDue({ ...tick, untilIdle: true, store, force: true }), (_level, message, fields) => console.error(`[skiplock] ${message}`, fields));
  return {
    store,
    onDueWork(atMs) {
      if (atMs > Date.now() + WAKE_EARLY_MS) return undefined;
      const work = background();
      waitUntil(work);
      return work;
    },
  };
}

function buildFromEnv<Tasks extends TaskList>(options: VercelOptions<Tasks>, maxDuration: number): { skiplock: Skiplock<Tasks>; http: Mounted } {
  const { maxDuration: _, basePath, sql: sqlFor, env: givenEnv, ...config } = options;
  const env = givenEnv ?? (process.env as VercelEnv);
  if (!sqlFor && !env.DATABASE_URL) throw new Error('DATABASE_URL is not set');
  const sql = sqlFor?.(env) ?? createNeonHttpDriver(env.DATABASE_URL!, env.NEON_FETCH_ENDPOINT ? { fetchEndpoint: env.NEON_FETCH_ENDPOINT } : {});
  const skiplock = createSkiplock<Tasks>({ callbacks: callbacksFromEnv(env, basePath ?? ''), ...config, sql, idleCheckMs: idleCheckMsFromEnv(env.IDLE_CHECK_MS, config.idleCheckMs) });
  const tick = tickOptionsFromEnv(env, { budgetMs: maxDuration * 1000 - HEADROOM_MS, pollIntervalMs: 1_000 });
  skiplock.setWakeDriver(vercelWakeDriver(skiplock, tick));
  // Without a usable API_TOKEN skiplock's routes answer 503 naming it; the project's other routes work.
  const app = createAppOrNotice({
    skiplock,
    apiToken: env.API_TOKEN ?? '',
    cronSecret: env.CRON_SECRET,
    metricsToken: env.METRICS_TOKEN,
    platform: 'vercel',
    tick,
    maxJobTimeoutMs: longestJobTimeoutMs(tick), // every tick here has this budget: a longer job is refused at enqueue
    // No runInBackground: every write that makes due work starts its tick through the wake driver.
  });
  return { skiplock, http: mount(app, basePath) };
}
