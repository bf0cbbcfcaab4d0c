/**
 * What the Worker and its Durable Object share: the environment they read, and one skiplock +
 * app per isolate, built on first use and cached by env (a deploy or a secret change gives a new
 * isolate, so a new env).
 *
 * Budgets, and the Cloudflare limits they respect (see docs/platforms.md):
 * - cron invocation (`scheduled`): wall time up to 15 min; CPU 30 s by default on Workers Paid
 *   (a ticking loop mostly waits on I/O). Each minute's tick runs TICK_BUDGET_MS = 70 s: a tick
 *   stops claiming a job once its timeout no longer fits, so the next minute's invocation has to
 *   start before this one stops claiming jobs of the default 10 s timeout, or such jobs that
 *   become due in a minute's last seconds would wait for the next minute. The 10 s overlap is
 *   harmless: ticks claim with SKIP LOCKED and write fenced results.
 * - HTTP request: `waitUntil` work may run 30 s after the response. The tick after an enqueue,
 *   and GET/POST /v1/tick, run HTTP_TICK_BUDGET_MS = 25 s.
 * - Durable Object alarm: wall time up to 15 min; one alarm ticks ALARM_TICK_BUDGET_MS = 25 s at most.
 * - Subrequests (each Neon HTTP query is one, and each request to the Durable Object or through a
 *   service binding): 50 per invocation on Workers Free, 10 000 on Paid; the one past the cap
 *   fails. Every tick keeps within SUBREQUEST_LIMIT (default 50, safe on both plans): it stops
 *   claiming while it can still write each claimed job's result (one each, plus SUBREQUESTS_PER_JOB
 *   for the handler's own, default 1) and conclude (the statement that says what is next, and the
 *   Durable Object's request). A background tick also leaves ROUTE_SUBREQUESTS to the route that
 *   enqueued. What a tick leaves is due now: the Durable Object's next alarm, an invocation of its
 *   own, takes it.
 * - Simultaneous connections: 6 per invocation waiting for response headers (a seventh waits, in
 *   order, until one has its headers); handlers' fetches and the tick's Neon requests share them,
 *   hence TICK_CONCURRENCY defaults to 5 here (WORKER_CONCURRENCY). A Durable Object's alarm and
 *   its requests share one such context.
 */
import { createAppOrNotice, longestJobTimeoutMs } from '../../http/app.ts';
import type { App } from '../../http/app-types.ts';
import { mount, type Mounted } from '../../http/mount.ts';
import { createTokenGuard, type TokenGuard } from '../../http/auth.ts';
import { platformSource } from '../../http/token-throttle.ts';
import type { Schedule } from '../../runtime/schedules/index.ts';
import { createSkiplock, type Skiplock, type SkiplockConfig } from '../../runtime/skiplock.ts';
import type { TaskList } from '../../runtime/tasks/index.ts';
import { TICK_DEFAULTS, type TickOptions } from '../../runtime/tick/index.ts';
import { createNeonHttpDriver } from '../../store/drivers/neon-http.ts';
import type { Sql } from '../../store/sql.ts';
import { createBackgroundTicks, type WakeDriver } from '../../runtime/wake/index.ts';
import { createMemoryWakeStore, DEFAULT_IDLE_CHECK_MS, DURABLE_IDLE_CHECK_MS, WAKE_EARLY_MS, type WakeStore } from '../../runtime/wake/index.ts';
import { callbacksFromEnv, ConfigError, idleCheckMsFromEnv, intFromEnv, streamConnectionMsFromEnv, streamTokensFromEnv, tickOptionsFromEnv, type CallbackEnv, type StreamEnv, type TickEnv } from '../env-options.ts';
import { inBackground } from './wait-until.ts';
import type { DurableObjectNamespace } from './runtime-types.ts';
import { createTickerForwardingStore, type TickerForwarding } from './ticker-client.ts';

/** The forwarding store, also where it was before ticker-client.ts held it (test/platform/cloudflare-forwarding.test.ts). */
export { createTickerForwardingStore };

export interface Env extends TickEnv, StreamEnv, Omit<CallbackEnv, 'API_TOKEN'> {
  /** Secret (`wrangler secret put DATABASE_URL`): the Neon connection string. */
  DATABASE_URL: string;
  /** Secret: bearer token of /v1/* and /metrics. */
  API_TOKEN: string;
  /** Secret, optional: also accepted on /v1/tick. */
  CRON_SECRET?: string;
  /** Secret, optional: a read-only token accepted on /metrics only. */
  METRICS_TOKEN?: string;
  /**
   * Handlers running at once per tick. Default 5 (WORKER_CONCURRENCY): Cloudflare gives an
   * invocation 6 connections, and the tick's own statements need one while handlers hold the rest.
   */
  TICK_CONCURRENCY?: string | number;
  /** Budget of the tick after an HTTP enqueue and of /v1/tick, in ms. Default 25 000 (waitUntil's 30 s). */
  HTTP_TICK_BUDGET_MS?: string | number;
  /** Budget of one Durable Object alarm's tick, in ms. Default 25 000. */
  ALARM_TICK_BUDGET_MS?: string | number;
  /**
   * Who ticks. "alarm" (the default): the SkiplockTicker Durable Object, whose alarm wakes at the
   * instant the wake state names; the minute cron only checks its alarm (no statement). "cron":
   * for a Worker without the binding: the minute cron ticks when the isolate's wake state says so.
   * Unset and the binding missing: "cron", with a warning.
   */
  TICKER?: string;
  /** The SkiplockTicker Durable Object namespace (wrangler.toml `[[durable_objects.bindings]]`). */
  SKIPLOCK_TICKER?: DurableObjectNamespace;
  /** A service binding to this Worker itself (wrangler.toml `[[services]]`): how a backlog fans out (fan-out.ts). */
  SKIPLOCK_SELF?: { fetch(request: Request): Promise<Response> };
  /** Invocations a backlog may run at once, the alarm's included (1: no fan-out). Default 8 (DEFAULT_MAX_PARALLEL_TICKS). */
  MAX_PARALLEL_TICKS?: string | number;
  /**
   * Subrequests one invocation may make (Workers Free: 50; Paid: 10 000 by default, or your
   * `limits.subrequests`). Default 50: safe on every plan; on Paid raise it (10000) so that a busy
   * tick is not cut into invocations of 50 statements.
   */
  SUBREQUEST_LIMIT?: string | number;
  /** Subrequests a handler makes itself (fetches, ctx.enqueue, step writes), kept per claimed job. Default 1. */
  SUBREQUESTS_PER_JOB?: string | number;
  /** Local development only: Neon's HTTP endpoint, pointed at the local Neon proxy by `npm start`. */
  NEON_FETCH_ENDPOINT?: string;
}

/** What createWorker is given: the tasks and schedules, and how to build the queue from env. */
export interface WorkerOptions<Tasks extends TaskList = TaskList> extends Omit<SkiplockConfig<Tasks>, 'sql'> {
  /** Serve the HTTP API and dashboard under this path (e.g. '/skiplock'); other paths are yours. Default: all paths. */
  basePath?: string;
  /** The database port for this env. Default: createNeonHttpDriver(env.DATABASE_URL) (NEON_FETCH_ENDPOINT honoured). */
  sql?: (env: Env) => Sql;
  /** Invocations a backlog may run at once (MAX_PARALLEL_TICKS overrides; needs the SKIPLOCK_SELF binding). Default 8 (measured: docs/platforms.md). */
  maxParallelTicks?: number;
  /** Subrequests one invocation may make (SUBREQUEST_LIMIT overrides). Default 50 (Workers Free's cap; Paid: 10 000). */
  subrequestLimit?: number;
  /** Subrequests a handler makes itself, kept per claimed job (SUBREQUESTS_PER_JOB overrides). Default 1. */
  subrequestsPerJob?: number;
}

/** SUBREQUEST_LIMIT when neither the option nor the variable sets it: Workers Free's cap, safe on every plan. */
export const DEFAULT_SUBREQUEST_LIMIT = 50;
/** SUBREQUESTS_PER_JOB's default: a handler's one fetch (a webhook, an email API). */
export const DEFAULT_SUBREQUESTS_PER_JOB = 1;
/**
 * Kept for the route that enqueued, by the background tick it starts in its invocation (its own
 * enqueue statement and a few of its own requests): the tick cannot see them.
 */
export const ROUTE_SUBREQUESTS = 5;
/**
 * A background tick's backstop (alarm mode): before it claims, the Durable Object is lowered to
 * the tick's deadline plus this, so that if the invocation dies (CPU limit, waitUntil's 30 s) the
 * alarm comes, reaps its leases when they expire and takes what it left; its conclusion, when it
 * comes, raises the backstop away. After its deadline the tick's conclusion takes a statement or two.
 */
export const BACKSTOP_SLACK_MS = 5_000;

/** maxParallelTicks when neither the option nor MAX_PARALLEL_TICKS sets it. */
export const DEFAULT_MAX_PARALLEL_TICKS = 8;

export interface Deployment<Tasks extends TaskList = TaskList> {
  skiplock: Skiplock<Tasks>;
  app: App;
  /** The app under the basePath. */
  http: Mounted;
  /** The minute cron's tick. */
  cronTick: TickOptions;
  /** The tick after an enqueue, of /v1/tick and of a fan-out invocation's conclusion (the HTTP budget). */
  httpTick: TickOptions;
  /** The wake store of this isolate (alarm mode: forwarded to the Durable Object). */
  store: WakeStore;
  /** One alarm's tick (Durable Object mode). */
  alarmTick: TickOptions;
  /** Whether the Durable Object drives ticks (TICKER unset or "alarm", and the binding exists). */
  alarmMode: boolean;
  /** IDLE_CHECK_MS: the longest an idle deployment goes without a database check. */
  idleCheckMs: number;
  /** MAX_PARALLEL_TICKS (fan-out.ts). */
  maxParallelTicks: number;
  basePath: string | undefined;
  /** The app's counts of wrong tokens: the fan-out route leaves a held source to the app (429). */
  tokenGuard: TokenGuard;
}

/** Connections one Workers invocation may have waiting for response headers; a seventh waits for one of them. */
export const CLOUDFLARE_CONNECTIONS = 6;

/**
 * Handlers at once per tick on Workers: one connection fewer than the invocation has, so that
 * handlers each waiting on one slow fetch leave a lane to the tick's own statements (heartbeats,
 * result writes, claims). With all six held, a heartbeat waits behind them, long jobs lose their
 * lease to another invocation's reaper, and run twice (test/platform/cloudflare-connections.test.ts).
 */
export const WORKER_CONCURRENCY = CLOUDFLARE_CONNECTIONS - 1;

/** One deployment per env for these options (createWorker calls it once). */
export function createDeployments<Tasks extends TaskList>(options: WorkerOptions<Tasks>): (env: Env) => Deployment<Tasks> {
  const deployments = new WeakMap<Env, Deployment<Tasks>>();
  // One wake state per isolate, not per env object: workerd may hand `fetch` and `scheduled` env
  // objects that differ, and an enqueue's wake-up must reach the cron's decision.
  const isolateStore = createMemoryWakeStore();
  return (env) => {
    let deployment = deployments.get(env);
    if (!deployment) deployments.set(env, (deployment = createDeployment(env, options, isolateStore)));
    return deployment;
  };
}

function createDeployment<Tasks extends TaskList>(
  env: Env,
  { basePath, sql: sqlFor, maxParallelTicks: parallel, subrequestLimit, subrequestsPerJob, ...config }: WorkerOptions<Tasks>,
  isolateStore: WakeStore,
): Deployment<Tasks> {
  if (!sqlFor && !env.DATABASE_URL) throw new Error('DATABASE_URL is not set (wrangler secret put DATABASE_URL)');
  const alarmMode = tickerMode(env) === 'alarm';
  // The Durable Object's storage keeps hints and hears every write: a daily check is enough there.
  const idleCheckMs = idleCheckMsFromEnv(env.IDLE_CHECK_MS, config.idleCheckMs ?? (alarmMode ? DURABLE_IDLE_CHECK_MS : DEFAULT_IDLE_CHECK_MS));
  const ticks = workerTickOptions(env, { subrequestLimit, subrequestsPerJob });
  // A job no tick here can fit is refused at enqueue (and by ctx.invoke): the cron's (or the alarm's) tick, or an HTTP one.
  const maxJobTimeoutMs = longestJobTimeoutMs(alarmMode ? ticks.alarmTick : ticks.cronTick, ticks.httpTick);
  const cronTick = { ...ticks.cronTick, maxJobTimeoutMs };
  // In alarm mode a Worker tick's conclusion may cost a request to the Durable Object: kept out of its subrequests.
  const httpTick = { ...ticks.httpTick, maxJobTimeoutMs, ...(alarmMode && { subrequestLimit: ticks.httpTick.subrequestLimit! - 1 }) };
  const alarmTick = { ...ticks.alarmTick, maxJobTimeoutMs };
  if (cronTick.concurrency! > WORKER_CONCURRENCY) {
    console.warn(
      `[skiplock] TICK_CONCURRENCY=${cronTick.concurrency}: a Workers invocation has ${CLOUDFLARE_CONNECTIONS} connections, shared by handlers' fetches and the tick's ` +
        `own statements; handlers holding them all delay heartbeats, and long jobs can lose their lease and run twice. ` +
        `Keep TICK_CONCURRENCY × connections a handler holds at once ≤ ${WORKER_CONCURRENCY}.`,
    );
  }
  const sql = sqlFor?.(env) ?? createNeonHttpDriver(env.DATABASE_URL, env.NEON_FETCH_ENDPOINT ? { fetchEndpoint: env.NEON_FETCH_ENDPOINT } : {});
  // Callback URLs (ctx.createCallback): PUBLIC_URL and CALLBACK_SECRET (or API_TOKEN), unless given.
  // Every tick of this skiplock keeps within the invocation's subrequests (an explicit tick() too).
  const budget = { subrequestLimit: httpTick.subrequestLimit, subrequestsPerJob: httpTick.subrequestsPerJob };
  const skiplock = createSkiplock<Tasks>({ callbacks: callbacksFromEnv(env, basePath ?? ''), streamTokens: streamTokensFromEnv(env), ...config, tick: { ...budget, ...config.tick }, sql, idleCheckMs });
  const store = alarmMode ? createTickerForwardingStore(env, isolateStore) : isolateStore;
  skiplock.setWakeDriver(workerWakeDriver(env, skiplock, { httpTick, alarmTick }, alarmMode, store));
  // Without a usable API_TOKEN skiplock's routes answer 503 naming it; the rest of the Worker works.
  const tokenGuard = createTokenGuard(platformSource('cloudflare'));
  const app = createAppOrNotice({
    skiplock,
    apiToken: env.API_TOKEN,
    cronSecret: env.CRON_SECRET,
    metricsToken: env.METRICS_TOKEN,
    platform: 'cloudflare',
    tokenGuard,
    tick: httpTick,
    maxJobTimeoutMs,
    streamConnectionMs: streamConnectionMsFromEnv(env),
    // No runInBackground: every write that makes due work starts its tick through the wake driver.
  });
  const maxParallelTicks = intFromEnv(env.MAX_PARALLEL_TICKS, parallel ?? DEFAULT_MAX_PARALLEL_TICKS, 'MAX_PARALLEL_TICKS');
  return { skiplock, app, http: mount(app, basePath), cronTick, httpTick, alarmTick, store, alarmMode, idleCheckMs, maxParallelTicks, basePath, tokenGuard };
}

/** TICKER, checked against the binding: "alarm" without SKIPLOCK_TICKER is a clear error, unset falls back to "cron". */
export function tickerMode(env: Pick<Env, 'TICKER' | 'SKIPLOCK_TICKER'>): 'alarm' | 'cron' {
  const ticker = env.TICKER ?? '';
  if (ticker !== '' && ticker !== 'alarm' && ticker !== 'cron') throw new ConfigError(`TICKER must be "alarm" or "cron", got ${JSON.stringify(ticker)}`);
  if (ticker === 'cron') return 'cron';
  if (env.SKIPLOCK_TICKER !== undefined) return 'alarm';
  if (ticker === 'alarm')
    throw new ConfigError(
      'TICKER = "alarm" needs the SkiplockTicker Durable Object: bind it in wrangler.toml ([[durable_objects.bindings]] name = "SKIPLOCK_TICKER", class_name = "SkiplockTicker", ' +
        'a [[migrations]] entry with new_sqlite_classes = ["SkiplockTicker"]) and export it (export const SkiplockTicker = worker.Ticker); or set TICKER = "cron"',
    );
  warnOnce('[skiplock] no SKIPLOCK_TICKER Durable Object binding: the minute cron ticks (TICKER = "cron"), so work due between two minutes waits for the next. Bind the Durable Object (docs/platforms.md), or set TICKER = "cron" to silence this.');
  return 'cron';
}

let warned = false;
const warnOnce = (message: string) => {
  if (!warned) console.warn(message);
  warned = true;
};

/**
 * The Worker's side of the wake state. Due now: a tick in the background of this invocation
 * (waitUntil from cloudflare:workers, so a user's own route needs no ctx), one chain per isolate;
 * due later: the Durable Object's alarm is lowered to it (alarm mode), or the isolate's memory is
 * (cron mode: the minute cron sees it, and waits inside its minute for it).
 *
 * Alarm mode, whether or not the background tick concludes: before it claims, the Durable Object
 * is lowered to a backstop (the tick's deadline + BACKSTOP_SLACK_MS), or to now when a task of
 * this deployment has a timeout only the alarm's budget fits (the alarm claims those at once); the
 * tick's conclusion (the store its backstop returned) raises the backstop away, or names
 * the next instant — counting as due the jobs only the alarm can fit (dueBudgetMs). If the
 * invocation dies, the alarm comes at the backstop, reaps its leases when they expire and takes
 * the rest. An idle deployment makes no statement for it. Costs one subrequest before the tick
 * and one after, besides the tick's statements, all within the invocation's subrequest budget.
 */
function workerWakeDriver(
  env: Env,
  skiplock: Skiplock,
  { httpTick, alarmTick }: { httpTick: TickOptions; alarmTick: TickOptions },
  alarmMode: boolean,
  store: WakeStore & Partial<TickerForwarding>,
): WakeDriver {
  const budgetMs = httpTick.budgetMs ?? TICK_DEFAULTS.budgetMs;
  const marginMs = httpTick.marginMs ?? TICK_DEFAULTS.marginMs;
  const alarmBudgetMs = alarmTick.budgetMs ?? TICK_DEFAULTS.budgetMs;
  const alarmUsableMs = alarmBudgetMs - (alarmTick.marginMs ?? TICK_DEFAULTS.marginMs);
  // Tasks only the alarm can claim (their timeout fits its budget, not the HTTP one's).
  const alarmOnly = alarmMode && [...skiplock.tasks.values()].some((t) => t.timeoutMs > budgetMs - marginMs && t.timeoutMs <= alarmUsableMs);
  const limit = httpTick.subrequestLimit;
  // One tally per chain: its reruns run in the invocation that started it (their subrequests add up).
  let counter = { spent: 0 };
  // httpTick's limit keeps the conclusion's request to the Durable Object; a chain's runs also keep
  // one for a rerun that finds the invocation's subrequests spent and can only tell the object.
  const tickLimit = limit === undefined ? undefined : limit - (alarmMode ? 1 : 0);
  const background = createBackgroundTicks(async (rerun) => {
    if (!rerun) counter = { spent: ROUTE_SUBREQUESTS };
    if (tickLimit !== undefined && counter.spent + (alarmMode ? 1 : 0) + 3 > tickLimit) {
      // This invocation cannot pay for a claim any more: what is due is the alarm's (told now with
      // the request kept for it; in cron mode the isolate's memory still says due now).
      if (alarmMode && counter.spent <= limit!) {
        counter.spent += 1;
        await store.tellNow!();
      }
      return;
    }
    let runStore: WakeStore = store;
    if (alarmMode) {
      counter.spent += 1;
      runStore = await store.backstop!(alarmOnly ? Date.now() : Date.now() + budgetMs + BACKSTOP_SLACK_MS);
    }
    await skiplock.tickIfDue({
      ...httpTick, untilIdle: true, store: runStore, force: true, subrequestCounter: counter,
      ...(tickLimit !== undefined && { subrequestLimit: tickLimit }),
      ...(alarmMode && { dueBudgetMs: alarmBudgetMs }),
    });
    if (alarmMode) counter.spent += 1;
  }, (level, message, fields) => console.error(`[skiplock] ${message}`, fields), budgetMs + BACKSTOP_SLACK_MS);
  return {
    store,
    onDueWork(atMs) {
      if (atMs <= Date.now() + WAKE_EARLY_MS) return inBackground(background());
      if (alarmMode) return inBackground(store.tell!(atMs));
      return undefined;
    },
  };
}

/** The options of the Worker's three kinds of tick, from its variables over the Worker's defaults. */
export function workerTickOptions(
  env: TickEnv & Pick<Env, 'HTTP_TICK_BUDGET_MS' | 'ALARM_TICK_BUDGET_MS' | 'SUBREQUEST_LIMIT' | 'SUBREQUESTS_PER_JOB'>,
  options: { subrequestLimit?: number | undefined; subrequestsPerJob?: number | undefined } = {},
): { cronTick: TickOptions; httpTick: TickOptions; alarmTick: TickOptions } {
  const cronTick = {
    ...tickOptionsFromEnv(env, { budgetMs: 70_000, pollIntervalMs: 1_000 }),
    concurrency: intFromEnv(env.TICK_CONCURRENCY, WORKER_CONCURRENCY, 'TICK_CONCURRENCY'),
    // Each invocation's subrequests (deployment.ts, Budgets): a cron's, an alarm's, a request's.
    subrequestLimit: intFromEnv(env.SUBREQUEST_LIMIT, options.subrequestLimit ?? DEFAULT_SUBREQUEST_LIMIT, 'SUBREQUEST_LIMIT'),
    subrequestsPerJob: countFromEnv(env.SUBREQUESTS_PER_JOB, options.subrequestsPerJob ?? DEFAULT_SUBREQUESTS_PER_JOB, 'SUBREQUESTS_PER_JOB'),
  };
  const httpTick = { ...cronTick, budgetMs: intFromEnv(env.HTTP_TICK_BUDGET_MS, 25_000, 'HTTP_TICK_BUDGET_MS') };
  const alarmTick = { ...cronTick, budgetMs: intFromEnv(env.ALARM_TICK_BUDGET_MS, 25_000, 'ALARM_TICK_BUDGET_MS') }; // tickAndPlanNext ticks until idle
  return { cronTick, httpTick, alarmTick };
}

/** An integer ≥ 0 from a variable, or the fallback. */
function countFromEnv(value: string | number | undefined, fallback: number, name: string): number {
  if (value === undefined || value === '') return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0) throw new ConfigError(`${name} must be an integer ≥ 0, got ${JSON.stringify(value)}`);
  return n;
}
