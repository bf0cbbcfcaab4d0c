/**
 * ctx.stream at run time (docs/streams.md): one run's stream writers. A write is checked and
 * buffered in memory (no round trip); the buffer is sent by one fenced statement
 * (src/store/streams.ts flushChunks) at the latest STREAM_LIMITS.flushMs after its first chunk, at
 * once when it holds flushChunks chunks or flushBytes bytes, at every step boundary (before a
 * step, sleep, invoke or wait is recorded), on close(), and at the end of the run before its
 * outcome is decided — so a job's chunks are stored before it is DONE. Flushes are sent one after
 * another, never two at once (each numbers its chunks after the stream's stored ones).
 *
 * Exactly once: each chunk carries its place in the run — `segment`, the step boundaries the
 * handler had crossed before it (each ctx.step, sleep, invoke or wait counts one when it is
 * called and one when it returns, recorded or new), and `ordinal`, its rank among its stream's
 * chunks since then. The same code reaches the same places on a replay or a retry, and a chunk at
 * a place already stored is not written again (the first write wins).
 */
import type { Job } from '../../core/types.ts';
import { toStoredJson } from '../../core/stored-json.ts';
import type { Clock } from '../../store/clock.ts';
import type { Sql } from '../../store/sql.ts';
import { flushChunks, type ChunkRow } from '../../store/streams.ts';
import { STREAM_LIMITS, streamName } from './limits.ts';

/** What ctx.stream(name) returns. */
export interface StreamWriter {
  /**
   * Buffers one chunk (JSON, or a string): no round trip, it is flushed within
   * STREAM_LIMITS.flushMs (100 ms) or at the next step boundary or the end of the run. A
   * TypeError for what JSON cannot hold, a RangeError for a chunk over 64 KiB of JSON or past
   * the run's 16 MiB; nothing is buffered then.
   */
  write(chunk: unknown): void;
  /** Flushes what is buffered (every stream's) and closes this stream: a write after it is a TypeError. */
  close(): Promise<void>;
}

export interface RunStreamsDeps {
  sql: Sql;
  now: () => Clock;
  job: Job;
  /** A flush found the lease lost: stop the run. */
  leaseLost(): void;
  /** Chunks a flush stored (for /metrics: skiplock_stream_chunks_written_total). */
  written?: ((count: number) => void) | undefined;
}

export interface RunStreams {
  open(name?: string): StreamWriter;
  /** A step boundary: a ctx.step (sleep, invoke, wait) was called, or returned. */
  boundary(): void;
  /** Sends what is buffered, after any flush under way; false when the lease was lost. Rejects when a statement fails (the chunks stay buffered). */
  flush(): Promise<boolean>;
  /** The run ended: the timer stops, later writes are dropped. */
  dispose(): void;
}

interface State {
  readonly deps: RunStreamsDeps;
  segment: number;
  readonly places: Map<string, { segment: number; ordinal: number }>;
  readonly closed: Set<string>;
  buffer: ChunkRow[];
  bufferedBytes: number;
  runBytes: number;
  timer: ReturnType<typeof setTimeout> | undefined;
  /** The last flush sent (flushes follow each other). */
  chain: Promise<unknown>;
  /** Flushes queued on the chain and not yet settled. */
  inFlight: number;
  /** A background flush is queued and has not started. */
  queued: boolean;
  /** The lease was lost, or the run ended: nothing more is written. */
  stopped: boolean;
  /** A flush found the lease lost. */
  lost: boolean;
}

export function createRunStreams(deps: RunStreamsDeps): RunStreams {
  const s: State = {
    deps, segment: 0, places: new Map(), closed: new Set(), buffer: [], bufferedBytes: 0, runBytes: 0,
    timer: undefined, chain: Promise.resolve(), inFlight: 0, queued: false, stopped: false, lost: false,
  };
  return {
    open: (name) => {
      const stream = streamName(name);
      return { write: (chunk) => write(s, stream, chunk), close: () => close(s, stream) };
    },
    boundary: () => void (s.segment += 1),
    flush: () => flush(s),
    dispose: () => {
      s.stopped = true;
      clearTimeout(s.timer);
      s.buffer = [];
    },
  };
}

function write(s: State, stream: string, chunk: unknown): void {
  if (s.closed.has(stream)) throw new TypeError(`ctx.stream(${JSON.stringify(stream)}): the stream is closed`);
  if (chunk === undefined || typeof chunk === 'function' || typeof chunk === 'symbol') throw new TypeError(`ctx.stream(${JSON.stringify(stream)}).write: a chunk is JSON or a string, got ${typeof chunk}`);
  const stored = toStoredJson(chunk, 'chunk', `a chunk of stream ${JSON.stringify(stream)}`, Number.MAX_SAFE_INTEGER);
  if ('error' in stored) throw new TypeError(stored.error.message);
  if (stored.bytes > STREAM_LIMITS.maxChunkBytes)
    throw new RangeError(`a chunk of stream ${JSON.stringify(stream)} is ${stored.bytes} bytes as JSON, more than the ${STREAM_LIMITS.maxChunkBytes} allowed (split it)`);
  if (s.runBytes + stored.bytes > STREAM_LIMITS.maxRunBytes)
    throw new RangeError(`the chunks of this run would exceed ${STREAM_LIMITS.maxRunBytes} bytes of JSON with this one (store large output elsewhere and stream a reference)`);
  if (s.stopped) return;
  let place = s.places.get(stream);
  if (place?.segment !== s.segment) s.places.set(stream, (place = { segment: s.segment, ordinal: 0 }));
  place.ordinal += 1;
  s.buffer.push({ stream, segment: place.segment, ordinal: place.ordinal, data: stored.value, bytes: stored.bytes });
  s.bufferedBytes += stored.bytes;
  s.runBytes += stored.bytes;
  if (s.buffer.length >= STREAM_LIMITS.flushChunks || s.bufferedBytes >= STREAM_LIMITS.flushBytes) background(s);
  else s.timer ??= setTimeout(() => background(s), STREAM_LIMITS.flushMs);
}

async function close(s: State, stream: string): Promise<void> {
  s.closed.add(stream);
  await flush(s);
}

/** A flush nobody awaits (the timer, a full buffer): a failure keeps the chunks for the next one. */
function background(s: State): void {
  if (s.queued) return;
  s.queued = true;
  flush(s).catch(() => {});
}

/**
 * Sends what is buffered, after any flush under way. Nothing buffered and nothing under way (every
 * run that does not stream, at each step boundary and at its end): answered at once, with no
 * promise chained on the tick's path.
 */
function flush(s: State): Promise<boolean> {
  if (s.inFlight === 0 && s.buffer.length === 0) return Promise.resolve(!s.lost);
  s.inFlight += 1;
  const next = s.chain.then(() => send(s)).finally(() => void (s.inFlight -= 1));
  s.chain = next.catch(() => undefined);
  return next;
}

/**
 * Sends what is buffered now, in statements of at most flushChunks chunks and flushBytes bytes
 * (one, almost always). Chunks written while it is under way wait for the next flush (their
 * timer, or a full buffer): a steady writer costs a flush per flushMs whatever the round trip.
 */
async function send(s: State): Promise<boolean> {
  s.queued = false;
  clearTimeout(s.timer);
  s.timer = undefined;
  const { deps } = s;
  let left = s.buffer.length;
  while (left > 0 && !s.stopped) {
    const batch = take(s, left);
    left -= batch.length;
    let held: boolean;
    try {
      const [row] = await deps.sql.query(flushChunks({ now: deps.now(), jobId: deps.job.id, lockedBy: deps.job.lockedBy ?? '', attempt: deps.job.attempts, chunks: batch }));
      held = Number(row?.held ?? 0) === 1;
      deps.written?.(Number(row?.written ?? 0));
    } catch (error) {
      s.buffer.unshift(...batch);
      s.bufferedBytes += batch.reduce((sum, c) => sum + c.bytes, 0);
      throw error;
    }
    if (!held) {
      s.stopped = s.lost = true;
      s.buffer = [];
      deps.leaseLost();
    }
  }
  return !s.lost;
}

function take(s: State, most: number): ChunkRow[] {
  let n = 0;
  let bytes = 0;
  while (n < most && n < STREAM_LIMITS.flushChunks && (n === 0 || bytes + s.buffer[n]!.bytes <= STREAM_LIMITS.flushBytes)) bytes += s.buffer[n++]!.bytes;
  s.bufferedBytes -= bytes;
  return s.buffer.splice(0, n);
}
