/**
 * The long-running Node runner: serves the HTTP API and ticks when work is due, for self-hosting
 * and `npm run start:node`. Its wake state is memory: every enqueue (from the HTTP API or from
 * your code through the same skiplock) wakes its loop at the instant the job is due, each tick
 * ends with the next due instant from the database, and between those it makes no statement but
 * one safety check per idleCheckMs. `stop()` is the graceful shutdown: no new claims, running jobs get
 * `drainMs` to finish, the rest are released back to the queue (the tick's `signal`/`drainMs`).
 */
import { serve } from '@hono/node-server';
import type { AddressInfo } from 'node:net';
import { createAppOrNotice } from '../../http/app.ts';
import { isNotMigrated } from '../../runtime/operations/index.ts';
import type { Skiplock } from '../../runtime/skiplock.ts';
import { retryDelayMs } from '../../runtime/tick/index.ts';
import type { TickOptions } from '../../runtime/tick/index.ts';
import { sleep } from '../../runtime/wake/index.ts';

export interface NodeRunnerOptions {
  skiplock: Skiplock;
  /** Bearer token of /v1/* and /metrics. */
  apiToken: string;
  /** Also accepted on /v1/tick. Default: none. */
  cronSecret?: string;
  /** A read-only token accepted on /metrics only. Default: none. */
  metricsToken?: string;
  /** Port to listen on; 0 picks a free one. Default 8787. */
  port?: number;
  /**
   * Address to listen on. Default '127.0.0.1': this machine only, so unreachable from outside a
   * container; '0.0.0.0' listens on every interface (src/app/node.ts: HOST, default 0.0.0.0).
   */
  hostname?: string;
  /** Options of every tick (concurrency, pollIntervalMs, leaseMs, …). */
  tick?: TickOptions;
  /** Budget of /v1/tick and of the tick an enqueue starts, in ms. Default 30 000. */
  requestTickBudgetMs?: number;
  /**
   * Deprecated, ignored: the loop sleeps until the next due instant (the wake state) instead of
   * polling. The safety check for work written behind skiplock's back is the skiplock's idleCheckMs.
   */
  intervalMs?: number;
  /**
   * On stop: how long running jobs may take to finish before they are released, in ms. Default
   * 7 000 (DEFAULT_DRAIN_MS): the release lands about 7.3 s after SIGTERM, inside the shortest
   * common grace before SIGKILL (`docker stop` 10 s; Kubernetes 30 s, systemd 90 s). Keep it a few
   * seconds under your platform's grace.
   */
  drainMs?: number;
  /**
   * Who a request comes from, for slowing down wrong tokens (AppOptions.clientAddress). Default:
   * the socket's address. Behind a reverse proxy every request comes from the proxy, so one
   * stranger's wrong tokens would hold everyone: read the header your proxy sets, e.g.
   * `(request) => request.headers.get('x-real-ip') ?? undefined`.
   */
  clientAddress?: (request: Request) => string | undefined;
  /** How long one SSE connection of GET /v1/jobs/{id}/stream is held (AppOptions.streamConnectionMs). Default 25 000. */
  streamConnectionMs?: number;
  /** Where the start-up line goes (where it listens, its tasks and schedules). Default: console.log. */
  log?: (line: string) => void;
  /**
   * The project's own routes, served by the same server: asked first for every request; what it
   * answers undefined for is skiplock's (the API, the dashboard at `/`). Default: none.
   */
  routes?: (request: Request) => Response | undefined | Promise<Response | undefined>;
}

export interface NodeRunner {
  url: string;
  port: number;
  /** Stops claiming, drains, releases, and closes the server. Resolves when all of that is done. */
  stop(): Promise<void>;
}

// The loop's ticks must fit the longest job timeout an enqueue accepts (24 h); an idle tick ends early.
const LOOP_BUDGET_MS = 24 * 3600 * 1000 + 60_000;

/** The default drainMs: the release after it fits `docker stop`'s 10 s grace, with seconds to spare. */
export const DEFAULT_DRAIN_MS = 7_000;

export async function startNodeRunner(options: NodeRunnerOptions): Promise<NodeRunner> {
  const { skiplock } = options;
  const shutdown = new AbortController();
  const stopping = { signal: shutdown.signal, drainMs: options.drainMs ?? DEFAULT_DRAIN_MS };
  // A missing or short secret: the routes answer 503 naming it, and the loop still ticks.
  const app = createAppOrNotice({
    skiplock,
    apiToken: options.apiToken,
    cronSecret: options.cronSecret,
    metricsToken: options.metricsToken,
    platform: 'node',
    ...(options.clientAddress ? { clientAddress: options.clientAddress } : {}),
    ...(options.streamConnectionMs !== undefined ? { streamConnectionMs: options.streamConnectionMs } : {}),
    tick: { ...options.tick, budgetMs: options.requestTickBudgetMs ?? 30_000, ...stopping },
    // No runInBackground: an enqueue wakes the loop below through the wake driver.
  });
  const loopTick: TickOptions = { pollIntervalMs: 1_000, ...options.tick, budgetMs: LOOP_BUDGET_MS, untilIdle: true, ...stopping };
  const sleeper: LoopSleep = { plannedAt: null, cutShort: () => {} };
  skiplock.setWakeDriver({
    onDueWork(atMs) {
      if (sleeper.plannedAt === null || atMs < sleeper.plannedAt) sleeper.cutShort();
    },
    // An explicit tick (tick(), GET /v1/tick) concludes with what the loop can claim: the loop takes jobs of any timeout.
    ticks: loopTick,
  });

  const hostname = options.hostname ?? '127.0.0.1';
  const { routes } = options;
  const fetch: typeof app.fetch = routes ? async (request, ...rest) => (await routes(request)) ?? app.fetch(request, ...rest) : app.fetch;
  const server = serve({ fetch, port: options.port ?? 8787, hostname });
  await new Promise<void>((resolve, reject) => {
    server.once('listening', resolve);
    server.once('error', reject);
  });
  const { port } = server.address() as AddressInfo;
  const url = `http://${hostname.includes(':') ? `[${hostname}]` : hostname}:${port}`;
  (options.log ?? console.log)(startLine(skiplock, url, hostname, stopping.drainMs));

  const loop = tickLoop(skiplock, loopTick, sleeper, shutdown.signal);
  return {
    url,
    port,
    async stop() {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      shutdown.abort();
      await loop;
      // Keep-alive connections would hold close() open; no request is in flight any more.
      if ('closeAllConnections' in server) server.closeAllConnections();
      await closed;
    },
  };
}

/**
 * The loop's sleep: it sleeps until the wake state's next instant (`plannedAt`); an enqueue for an
 * earlier instant cuts it short (`cutShort`, which the loop sets for each tick and each sleep).
 */
interface LoopSleep {
  plannedAt: number | null;
  cutShort: () => void;
}

/** The runner's loop: ticks until idle, then sleeps until the next due instant, until `shutdown`. */
async function tickLoop(skiplock: Skiplock, loopTick: TickOptions, sleeper: LoopSleep, shutdown: AbortSignal): Promise<void> {
  // Ticks in a row that threw or could not say when work is next due (the conclusion statement
  // failed, leaving the state "due now"): each waits the back-off (retry-backoff.ts) instead of
  // ticking again at once, which would send the failing statement hundreds of times a second.
  let failures = 0;
  while (!shutdown.aborted) {
    // Set before the tick: a wake during it makes the next sleep end at once.
    let woken = false;
    sleeper.cutShort = () => {
      woken = true;
    };
    sleeper.plannedAt = Date.now();
    let failure: unknown = 'the wake state was not written';
    const next = await skiplock
      .tickIfDue(loopTick)
      .catch((error: unknown) => {
        if (!isNotMigrated(error)) console.error('[skiplock] tick failed', error); // not_migrated: logged once by the tick
        failure = error;
        return null;
      });
    failures = next?.concluded ? 0 : failures + 1;
    if (woken || shutdown.aborted) continue;
    sleeper.plannedAt = failures > 0 ? Date.now() + retryDelayMs(failures, failure) : next!.nextAtMs;
    const wake = new AbortController();
    sleeper.cutShort = () => wake.abort();
    const stop = () => wake.abort();
    shutdown.addEventListener('abort', stop, { once: true });
    await sleep(sleeper.plannedAt === null ? Infinity : Math.max(0, sleeper.plannedAt - Date.now()), wake.signal);
    shutdown.removeEventListener('abort', stop);
  }
}

/** What the runner says once it listens: where, what it runs, and how it stops. */
function startLine(skiplock: Skiplock, url: string, hostname: string, drainMs: number): string {
  const local = ['127.0.0.1', 'localhost', '::1'].includes(hostname);
  const list = (names: readonly string[]) => (names.length > 0 ? names.join(', ') : 'none');
  return [
    `[skiplock] Node runner listening on ${url}`,
    ...(local ? [` (this machine only: pass hostname: '0.0.0.0' to startNodeRunner to accept connections from outside, as in a container)`] : []),
    `; tasks: ${list([...skiplock.tasks.keys()])}`,
    `; schedules: ${list(skiplock.schedules.map((s) => s.name))}`,
    `; drains running jobs for ${drainMs / 1000} s on stop`,
  ].join('');
}
