/**
 * The long-running Node runner: serves the HTTP API and ticks every second, for self-hosting and
 * `npm run start:node`. `stop()` is the graceful shutdown: no new claims, running jobs get
 * `drainMs` to finish, the rest are released back to the queue (the tick's `signal`/`drainMs`).
 */
import { serve } from '@hono/node-server';
import type { AddressInfo } from 'node:net';
import { createAppOrNotice } from '../../http/app.ts';
import { isNotMigrated } from '../../runtime/schema-check.ts';
import type { Skiplock } from '../../runtime/skiplock.ts';
import type { TickOptions } from '../../runtime/tick.ts';

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
  /** Address to listen on. Default '127.0.0.1'. */
  hostname?: string;
  /** Options of every tick (concurrency, pollIntervalMs, leaseMs, …). */
  tick?: TickOptions;
  /** Budget of /v1/tick and of the tick an enqueue starts, in ms. Default 30 000. */
  requestTickBudgetMs?: number;
  /** Pause between two ticks once the queue is idle, in ms. Default 1 000. */
  intervalMs?: number;
  /** On stop: how long running jobs may take to finish before they are released, in ms. Default 10 000. */
  drainMs?: number;
}

export interface NodeRunner {
  url: string;
  port: number;
  /** Stops claiming, drains, releases, and closes the server. Resolves when all of that is done. */
  stop(): Promise<void>;
}

// The loop's ticks must fit the longest job timeout an enqueue accepts (24 h); an idle tick ends early.
const LOOP_BUDGET_MS = 24 * 3600 * 1000 + 60_000;

export async function startNodeRunner(options: NodeRunnerOptions): Promise<NodeRunner> {
  const { skiplock } = options;
  const shutdown = new AbortController();
  const stopping = { signal: shutdown.signal, drainMs: options.drainMs ?? 10_000 };
  const background = new Set<Promise<unknown>>();
  // A missing or short secret: the routes answer 503 naming it, and the loop still ticks.
  const app = createAppOrNotice({
    skiplock,
    apiToken: options.apiToken,
    cronSecret: options.cronSecret,
    metricsToken: options.metricsToken,
    platform: 'node',
    tick: { ...options.tick, budgetMs: options.requestTickBudgetMs ?? 30_000, ...stopping },
    // Node keeps running after the response; the runner only remembers the tick so that stop() waits for it.
    runInBackground: (work) => {
      background.add(work);
      void work.finally(() => background.delete(work));
    },
  });

  const server = serve({ fetch: app.fetch, port: options.port ?? 8787, hostname: options.hostname ?? '127.0.0.1' });
  await new Promise<void>((resolve, reject) => {
    server.once('listening', resolve);
    server.once('error', reject);
  });
  const { port } = server.address() as AddressInfo;

  const loop = (async () => {
    while (!shutdown.signal.aborted) {
      await skiplock.tick({ pollIntervalMs: 1_000, ...options.tick, budgetMs: LOOP_BUDGET_MS, untilIdle: true, ...stopping })
        .catch((error: unknown) => isNotMigrated(error) || console.error('[skiplock] tick failed', error)); // not_migrated: logged once by the tick
      await sleep(options.intervalMs ?? 1_000, shutdown.signal);
    }
  })();

  return {
    url: `http://${options.hostname ?? '127.0.0.1'}:${port}`,
    port,
    async stop() {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      shutdown.abort();
      await Promise.all([loop, ...background]);
      // Keep-alive connections would hold close() open; no request is in flight any more.
      if ('closeAllConnections' in server) server.closeAllConnections();
      await closed;
    },
  };
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
    function done() {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
  });
}
