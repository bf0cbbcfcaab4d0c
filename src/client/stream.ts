/**
 * The client's streamJob (docs/streams.md, "The typed client"): GET /v1/jobs/{id}/stream read
 * with fetch and a small SSE parser, as an async iterator of chunks that reconnects by itself —
 * when the server ends a connection (its connection life) or the network drops it — and resumes
 * after the last seq it yielded, so each chunk is yielded once, in order. It ends at the
 * stream's `end`, and when `signal` aborts.
 */
import { errorFromResponse, SkiplockApiError } from './errors.ts';
import { parseSse } from './sse.ts';

export interface StreamChunkJson {
  /** 1, 2, 3, … in the stream's order. */
  seq: number;
  /** The chunk as written (a string stays a string). */
  data: unknown;
  /** When it was stored: not carried by the SSE route, so absent here (skiplock.readStream has it). */
  at?: string;
}

export interface StreamJobOptions {
  /** The stream's name (ctx.stream(name)). Default `default`. */
  name?: string;
  /** Only the chunks after this seq. Default 0: from the first. */
  after?: number;
  /** Stops the iterator (it ends without an error) and its connection. */
  signal?: AbortSignal;
  /**
   * A read token from skiplock.streamToken(id), sent as `?token=` instead of the client's API
   * token (a browser that must not hold API_TOKEN).
   */
  token?: string;
}

export interface StreamTransport {
  base: string;
  send: (request: Request) => Response | Promise<Response>;
  headers: Record<string, string>;
}

/** Consecutive failed connections (network, 5xx, 429) before the iterator gives up and throws the last error. */
const MAX_FAILURES = 6;
/** Wait before reconnecting after a failure (doubling) or after a connection that brought nothing. */
const RETRY_MS = 500;

export async function* streamJob(t: StreamTransport, id: string, options: StreamJobOptions = {}): AsyncGenerator<StreamChunkJson> {
  const { signal } = options;
  let last = options.after ?? 0;
  let failures = 0;
  while (!signal?.aborted) {
    let yielded = false;
    try {
      const response = await connect(t, id, options, last);
      for await (const event of parseSse(response.body!, signal)) {
        if (event.event === 'end') return;
        const seq = Number(event.id);
        if (event.event !== 'message' || !Number.isInteger(seq) || seq <= last) continue; // never a chunk twice
        last = seq;
        yielded = true;
        failures = 0;
        yield { seq, data: JSON.parse(event.data) as unknown };
        if (signal?.aborted) return;
      }
    } catch (error) {
      if (signal?.aborted) return; // fetch's AbortError
      if (error instanceof SkiplockApiError && error.status < 500 && error.status !== 429) throw error;
      if (++failures >= MAX_FAILURES) throw error;
    }
    // The connection ended without `end` (its life was up, or it failed): resume after `last`.
    if (!yielded) await pause(RETRY_MS * 2 ** Math.max(0, failures - 1), signal);
  }
}

async function connect(t: StreamTransport, id: string, options: StreamJobOptions, after: number): Promise<Response> {
  const search = new URLSearchParams();
  if (options.name !== undefined) search.set('name', options.name);
  if (after > 0) search.set('after', String(after));
  if (options.token !== undefined) search.set('token', options.token);
  const headers: Record<string, string> = { ...t.headers, accept: 'text/event-stream' };
  if (options.token !== undefined) delete headers.authorization;
  const query = search.toString() ? `?${search}` : '';
  const response = await t.send(new Request(`${t.base}/v1/jobs/${encodeURIComponent(id)}/stream${query}`, { headers, ...(options.signal ? { signal: options.signal } : {}) }));
  if (!response.ok) throw await errorFromResponse(response);
  if (!response.body) throw new SkiplockApiError(response.status, { code: 'unexpected_response', message: 'the stream answered without a body' });
  return response;
}

function pause(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });
}
