/**
 * GET /v1/jobs/{id}/stream (docs/streams.md, "Reading over HTTP"): a job's stream as Server-Sent
 * Events, read through the app's stream hub (src/runtime/streams/hub.ts: the readers of one
 * stream in this process share one poll). Its auth — the bearer token, or a per-job read token
 * as `?token=` — is checked before it (streamTokenAuth, in app.ts's guard).
 */
import type { Context, MiddlewareHandler } from 'hono';
import { streamSSE, type SSEStreamingApi } from 'hono/streaming';
import { SkiplockError } from '../../core/errors.ts';
import type { ReadStreamResult, StreamReader } from '../../runtime/streams/index.ts';
import type { Skiplock } from '../../runtime/skiplock.ts';
import type { App, RouteDeps } from '../app-types.ts';
import { bearerToken } from '../auth.ts';
import { createRoute } from '../zod-openapi.ts';
import { bearerSecurity, errorResponses } from '../schemas/shared.ts';
import { SSE_DESCRIPTION, StreamHeaders, StreamParams, StreamQuery } from '../schemas/streams.ts';
import * as z from 'zod';

export const STREAM_ROUTE_DEFAULTS = {
  /** How long one SSE connection is held before the route ends it (EventSource then reconnects). */
  connectionMs: 25_000,
  /** A comment line this often while the stream is silent, so proxies keep the connection. */
  heartbeatMs: 15_000,
  /** The `retry:` the route asks EventSource to wait before it reconnects, in ms. */
  retryMs: 1000,
} as const;

const streamRoute = createRoute({
  method: 'get',
  operationId: 'streamJob',
  path: '/v1/jobs/{id}/stream',
  summary: "A job's stream (ctx.stream) as Server-Sent Events",
  description: SSE_DESCRIPTION,
  tags: ['jobs'],
  security: [...bearerSecurity, { streamToken: [] }],
  request: { params: StreamParams, query: StreamQuery, headers: StreamHeaders },
  responses: {
    200: { description: SSE_DESCRIPTION, content: { 'text/event-stream': { schema: z.string() } } },
    ...errorResponses(400, 401, 404),
  },
});

const STREAM_PATH = /^\/v1\/jobs\/([^/]+)\/stream$/;

/**
 * Whether a request is for the stream route with a `?token=` and no bearer token: then the read
 * token is its credential (checked by streamTokenAuth), and no other token is asked for.
 */
export function usesStreamToken(c: Context): boolean {
  return c.req.method === 'GET' && STREAM_PATH.test(c.req.path) && c.req.query('token') !== undefined && bearerToken(c.req.header('authorization')) === undefined;
}

/**
 * A read token's check: it must be valid (signed by this deployment, not expired) and name the
 * job of the path; otherwise 401 before anything is read. Its responses may be read from any
 * origin (the token, not a cookie, is the credential).
 */
export function streamTokenAuth(skiplock: Skiplock): MiddlewareHandler {
  return async (c, next) => {
    const jobId = STREAM_PATH.exec(c.req.path)?.[1];
    const named = await skiplock.verifyStreamToken(c.req.query('token') ?? '');
    c.header('Access-Control-Allow-Origin', '*');
    if (!named) throw new SkiplockError('unauthorized', 'invalid or expired stream token (skiplock.streamToken)');
    if (named.jobId !== jobId) throw new SkiplockError('unauthorized', 'this stream token is for another job');
    await next();
  };
}

export function registerStreamRoutes(app: App, deps: RouteDeps): void {
  app.openapi(streamRoute, async (c) => {
    const { id } = c.req.valid('param');
    const { name, after } = c.req.valid('query');
    const from = c.req.valid('header')['last-event-id'] ?? after ?? 0;
    const reader = deps.streams.open(id, { name, after: from });
    let first: ReadStreamResult;
    try {
      first = await reader.next(0); // not_found, invalid_request: an error response, before any event
    } catch (error) {
      reader.close();
      throw error;
    }
    const deadline = deps.arrivedAt(c) + deps.streamConnectionMs;
    return streamSSE(c, (stream) => sendEvents(stream, reader, first, { deadline, heartbeatMs: deps.streamHeartbeatMs })) as never;
  });
}

/** The events of one connection: the chunks as they come, `end` when the stream is over, until the connection's life is up. */
async function sendEvents(stream: SSEStreamingApi, reader: StreamReader, first: ReadStreamResult, o: { deadline: number; heartbeatMs: number }): Promise<void> {
  stream.onAbort(() => reader.close());
  // A client that stops reading holds a write: the connection ends at its deadline all the same.
  const cut = setTimeout(() => stream.abort(), Math.max(0, o.deadline - performance.now()) + 1000);
  try {
    await stream.write(`retry: ${STREAM_ROUTE_DEFAULTS.retryMs}\n\n`);
    let page = first;
    let lastWrite = performance.now();
    for (;;) {
      for (const chunk of page.chunks) await stream.writeSSE({ id: String(chunk.seq), data: JSON.stringify(chunk.data) });
      if (page.done) {
        await stream.writeSSE({ event: 'end', data: '{}' });
        return;
      }
      const now = performance.now();
      if (page.chunks.length > 0) lastWrite = now;
      if (stream.aborted || stream.closed || now >= o.deadline) return;
      if (now - lastWrite >= o.heartbeatMs) {
        await stream.write(': keep-alive\n\n');
        lastWrite = now;
      }
      page = await reader.next(Math.max(1, Math.min(o.deadline - now, o.heartbeatMs - (now - lastWrite))));
    }
  } catch (error) {
    // A failed read (the database, the job deleted): the connection ends without `end`, telling the
    // reader nothing of it; EventSource resumes, and a job gone is then a 404.
    console.error('[skiplock] a stream read failed; the connection ends', error);
  } finally {
    clearTimeout(cut);
    reader.close();
  }
}
