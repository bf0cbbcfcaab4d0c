/**
 * The HTTP API of CONTRACT.md as a hono app, used unchanged by every platform:
 *
 *   const app = createApp({ skiplock, apiToken: env.API_TOKEN, cronSecret: env.CRON_SECRET,
 *                           runInBackground: (work, c) => c.executionCtx.waitUntil(work) });
 *   export default { fetch: app.fetch };
 */
import { OpenAPIHono } from './zod-openapi.ts';
import type { Context } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { SkiplockError } from '../core/errors.ts';
import { toIssues } from '../runtime/tasks/index.ts';
import { isNotMigrated } from '../runtime/operations/index.ts';
import type { Skiplock } from '../runtime/skiplock.ts';
import { TICK_DEFAULTS, type TickOptions } from '../runtime/tick/index.ts';
import type { App, RouteDeps } from './app-types.ts';
import { createTokenGuard, requireBearer, type TokenGuard } from './auth.ts';
import { platformSource } from './token-throttle.ts';
import { registerDashboardRoutes } from './dashboard/index.ts';
import { errorResponse, notFoundOrNotAllowed, onError } from './errors.ts';
import { requireSchema } from './schema-gate.ts';
import { checkSecrets, type SecretPlatform } from './secrets.ts';
import { registerDocsRoutes } from './routes/docs.ts';
import { registerEventRoutes, requireCallbackToken } from './routes/events.ts';
import { registerHealthRoutes } from './routes/health.ts';
import { registerJobRoutes } from './routes/jobs.ts';
import { registerMetricsRoutes } from './routes/metrics.ts';
import { registerScheduleRoutes } from './routes/schedules.ts';
import { registerStatsRoutes } from './routes/stats.ts';
import { registerStreamRoutes, STREAM_ROUTE_DEFAULTS, streamTokenAuth, usesStreamToken } from './routes/streams.ts';
import { createStreamHub } from '../runtime/streams/index.ts';
import { registerTaskRoutes } from './routes/tasks.ts';
import { registerTickRoutes } from './routes/tick.ts';
import { registerVersionRoutes } from './routes/versions.ts';

export interface AppOptions {
  /** The queue this app serves (createSkiplock). Required. */
  skiplock: Skiplock;
  /** Bearer token for /v1/* and /metrics (API_TOKEN). Required; at least 16 characters. */
  apiToken: string;
  /** Also accepted on the tick route, as Vercel cron sends it (CRON_SECRET; at least 16 characters). Default: none. */
  cronSecret?: string;
  /** A read-only token accepted on /metrics only (METRICS_TOKEN; at least 16 characters), for a scraper. Default: none. */
  metricsToken?: string;
  /**
   * Where the 503 of a missing or short secret tells the user to set it (createAppOrNotice).
   * Default: no platform named.
   */
  platform?: SecretPlatform;
  /** Options of the ticks that GET/POST /v1/tick runs. Default: the skiplock's own tick options. */
  tick?: TickOptions;
  /**
   * Keeps work alive after the response, on platforms that stop an invocation when it responds.
   * After a successful enqueue (or retry) the app passes it `skiplock.tick({...tick, untilIdle: true})`,
   * so the new job starts at once instead of at the next cron tick. Cloudflare:
   * `(work, c) => c.executionCtx.waitUntil(work)`; Vercel: `waitUntil` from @vercel/functions;
   * Node: `() => {}` (the promise runs on by itself). Default: none (no tick after enqueue).
   */
  runInBackground?: (work: Promise<unknown>, c: Context) => void;
  /** Largest request body accepted, in bytes; larger ones get 413. Default 1 MiB. */
  maxBodyBytes?: number;
  /**
   * The longest job timeout any tick of this deployment can claim: its longest tick's budgetMs
   * minus marginMs (on Cloudflare, the minute cron's tick, not the HTTP one). An enqueue whose
   * timeoutMs (given, or the task's) is longer gets 400 invalid_request instead of a job that would
   * wait forever, and the dashboard counts such jobs already queued. Default: not checked.
   */
  maxJobTimeoutMs?: number;
  /**
   * The longest a `POST /v1/jobs?wait=` request holds, in ms: a larger `wait` is cut to it (a
   * platform with a shorter request limit sets it lower). At most and default 25 000.
   */
  maxWaitMs?: number;
  /**
   * Who a request comes from, for slowing down wrong tokens (a bearer token anywhere, the
   * dashboard's login): each source's failures are counted on their own, and after 5 it waits
   * (429 with Retry-After) — docs/http-api.md, "Failed tokens". Return the client's address, or
   * undefined when unknown (such requests are not throttled). Default: what `platform` vouches for
   * (CF-Connecting-IP on Cloudflare, the last X-Forwarded-For hop on Vercel, the socket on Node);
   * behind a proxy of your own, read the header it sets, e.g. `(request) => request.headers.get('x-real-ip') ?? undefined`.
   */
  clientAddress?: (request: Request) => string | undefined;
  /**
   * How long one `GET /v1/jobs/{id}/stream` connection is held, in ms: the route ends the response
   * (without `end`) before it, and EventSource reconnects with Last-Event-ID. Keep it under the
   * platform's request limit (a Vercel function's duration). Default 25 000; STREAM_CONNECTION_MS
   * on the platform entry points.
   */
  streamConnectionMs?: number;
  /** @internal A comment line this often while a stream is silent. Default 15 000. */
  streamHeartbeatMs?: number;
  /** @internal The counts of wrong tokens, shared with a platform's own routes that check a token before the app (fan-out, Vercel cron). */
  tokenGuard?: TokenGuard;
}

export const APP_DEFAULTS = { maxBodyBytes: 1024 * 1024, maxWaitMs: 25_000 } as const;

/** AppOptions.maxJobTimeoutMs of a deployment whose ticks run with these options: the longest budget − its margin. */
export function longestJobTimeoutMs(...ticks: readonly TickOptions[]): number {
  return Math.max(...ticks.map((t) => (t.budgetMs ?? TICK_DEFAULTS.budgetMs) - (t.marginMs ?? TICK_DEFAULTS.marginMs)));
}

/**
 * The app, or — when a secret is missing or too short — an app answering every request with 503
 * `not_configured` naming the variable and where to set it: a platform entry point uses it so
 * that the user's own routes keep working while skiplock's wait for their configuration.
 */
export function createAppOrNotice(options: AppOptions): App {
  try {
    return createApp(options);
  } catch (error) {
    if (!(error instanceof SkiplockError) || error.code !== 'not_configured') throw error;
    console.error(`[skiplock] ${error.message}`);
    return createNoticeApp(error);
  }
}

/** An app answering every request with this error (503 not_configured). */
export function createNoticeApp(error: SkiplockError): App {
  const app: App = new OpenAPIHono();
  app.all('*', (c) => errorResponse(c, error));
  return app;
}

/** Throws SkiplockError not_configured when API_TOKEN is missing or a secret is shorter than 16 characters. */
export function createApp(options: AppOptions): App {
  checkSecrets(
    [
      { name: 'API_TOKEN', value: options.apiToken, required: true },
      { name: 'CRON_SECRET', value: options.cronSecret, required: false },
      { name: 'METRICS_TOKEN', value: options.metricsToken, required: false },
    ],
    options.platform,
  );
  // When each request arrived: the budgets of the ticks it starts count from there (the platform's limit does).
  const arrivals = new WeakMap<Request, number>();
  const deps = routeDeps(options, arrivals);

  const app: App = new OpenAPIHono({
    // Every zod failure of a route's params, query, headers or body: 400 invalid_request with its issues.
    defaultHook: (result) => {
      if (!result.success) throw new SkiplockError('invalid_request', `invalid ${TARGET_NAMES[result.target] ?? result.target}`, toIssues(result.error));
    },
  });
  app.onError(onError);
  // A known path with another method: 405 with Allow; an unknown path: 404.
  app.notFound(notFoundOrNotAllowed(() => app.routes));
  app.use('*', async (c, next) => {
    arrivals.set(c.req.raw, performance.now());
    await next();
  });
  guardRequests(app, deps, options.maxBodyBytes ?? APP_DEFAULTS.maxBodyBytes);
  registerRoutes(app, deps);
  return app;
}

/** What every route is given: the queue, the tokens, the tick options, the request's arrival, and startWork. */
function routeDeps(options: AppOptions, arrivals: WeakMap<Request, number>): RouteDeps {
  const { skiplock } = options;
  const tick = options.tick ?? {};
  const runInBackground = options.runInBackground;
  const arrivedAt = (c: Context) => arrivals.get(c.req.raw) ?? performance.now();
  const clientAddress = options.clientAddress;
  const tokenGuard = options.tokenGuard ?? createTokenGuard(clientAddress ? (request) => clientAddress(request) : platformSource(options.platform));
  return {
    skiplock,
    tokenGuard,
    apiToken: options.apiToken,
    cronSecret: options.cronSecret || undefined,
    metricsToken: options.metricsToken || undefined,
    tick,
    arrivedAt,
    maxJobTimeoutMs: options.maxJobTimeoutMs,
    maxWaitMs: Math.max(0, Math.min(options.maxWaitMs ?? APP_DEFAULTS.maxWaitMs, APP_DEFAULTS.maxWaitMs)),
    streams: createStreamHub({ read: (jobId, o) => skiplock.readStream(jobId, o) }),
    streamConnectionMs: options.streamConnectionMs ?? STREAM_ROUTE_DEFAULTS.connectionMs,
    streamHeartbeatMs: options.streamHeartbeatMs ?? STREAM_ROUTE_DEFAULTS.heartbeatMs,
    startWork(c) {
      if (!runInBackground) return;
      const work = skiplock.tick({ ...tick, untilIdle: true, startedAt: arrivedAt(c) }).catch((error: unknown) => {
        if (!isNotMigrated(error)) console.error('[skiplock] background tick failed', error); // not_migrated: logged once by the tick
      });
      runInBackground(work, c);
    },
  };
}

/** The middleware before any route: who may call what (tokens), the schema gate, the body's size limit. */
function guardRequests(app: App, deps: RouteDeps, maxBodyBytes: number): void {
  const { skiplock, tokenGuard } = deps;
  // Auth before reading any body: strangers do not get to make us buffer a megabyte.
  const apiAuth = requireBearer(tokenGuard, [deps.apiToken]);
  app.use('/v1/tick', requireBearer(tokenGuard, [deps.apiToken, deps.cronSecret]));
  // A callback URL carries its own credential (an HMAC-signed token): no bearer token, and a wrong one is 404 before the body is read.
  // A stream's `?token=` (skiplock.streamToken) is accepted on GET /v1/jobs/{id}/stream only, for its job only.
  const streamAuth = streamTokenAuth(skiplock);
  app.use('/v1/*', async (c, next) => {
    if (c.req.path === '/v1/tick' || c.req.path.startsWith('/v1/callbacks/')) return next();
    return usesStreamToken(c) ? streamAuth(c, next) : apiAuth(c, next);
  });
  app.use('/v1/callbacks/:token', requireCallbackToken(skiplock));
  app.use('/metrics', requireBearer(tokenGuard, [deps.apiToken, deps.metricsToken]));
  app.use('/v1/*', requireSchema(skiplock));
  app.use('/metrics', requireSchema(skiplock));
  app.use(
    '*',
    bodyLimit({
      maxSize: maxBodyBytes,
      onError: () => {
        throw new SkiplockError('payload_too_large', `the body is larger than ${maxBodyBytes} bytes`);
      },
    }),
  );
}

/** Every route: the API's, the docs' and the dashboard's. */
function registerRoutes(app: App, deps: RouteDeps): void {
  registerJobRoutes(app, deps);
  registerStreamRoutes(app, deps);
  registerVersionRoutes(app, deps);
  registerStatsRoutes(app, deps);
  registerTaskRoutes(app, deps);
  registerEventRoutes(app, deps);
  registerScheduleRoutes(app, deps);
  registerTickRoutes(app, deps);
  registerHealthRoutes(app, deps);
  registerMetricsRoutes(app, deps);
  registerDocsRoutes(app);
  registerDashboardRoutes(app, deps);
}

const TARGET_NAMES: Record<string, string> = {
  json: 'request body',
  query: 'query string',
  param: 'path parameter',
  header: 'header',
};
