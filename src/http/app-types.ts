/** Types shared by the app factory and its route files. */
import type { OpenAPIHono } from '@hono/zod-openapi';
import type { Context } from 'hono';
import type { Skiplock } from '../runtime/skiplock.ts';
import type { StreamHub } from '../runtime/streams/index.ts';
import type { TickOptions } from '../runtime/tick/index.ts';
import type { TokenGuard } from './auth.ts';

export type App = OpenAPIHono;

/** What every route file receives from createApp (options with defaults filled in). */
export interface RouteDeps {
  skiplock: Skiplock;
  /** Every check of a token the API token could be guessed through (bearer, deep health, login): wrong ones are counted per source and slowed down. */
  tokenGuard: TokenGuard;
  apiToken: string;
  cronSecret: string | undefined;
  /** The read-only token of /metrics (METRICS_TOKEN), if any. */
  metricsToken: string | undefined;
  /** Options of the tick route. */
  tick: TickOptions;
  /** When the request arrived (performance.now()): what HTTP ticks count their budget from. */
  arrivedAt(c: Context): number;
  /** AppOptions.maxJobTimeoutMs: longer job timeouts are refused at enqueue. */
  maxJobTimeoutMs: number | undefined;
  /** The longest `?wait=` of POST /v1/jobs, in ms (AppOptions.maxWaitMs). */
  maxWaitMs: number;
  /** The readers of streams in this app (GET /v1/jobs/{id}/stream): one poll per stream. */
  streams: StreamHub;
  /** How long one SSE connection is held (AppOptions.streamConnectionMs). */
  streamConnectionMs: number;
  /** A comment line this often while a stream is silent. */
  streamHeartbeatMs: number;
  /** Starts a tick in the background after new work was queued (no-op without runInBackground). */
  startWork(c: Context): void;
}
