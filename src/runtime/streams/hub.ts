/**
 * The readers of streams in one process or isolate (docs/streams.md, "Cost per open stream"):
 * readers of one job's stream share ONE poll — a readStream after the newest seq any of them has
 * seen — instead of a statement per reader per poll. The poll backs off while the stream is
 * silent (STREAM_POLL.minDelayMs doubling to maxDelayMs), goes back to fast when chunks arrive,
 * and stops when the stream is over or no reader is left. The chunks of the last polls stay in
 * memory (at most STREAM_POLL.windowChunks, and about windowBytes of JSON), so a reader that arrives or resumes within them
 * costs no statement; a reader further behind reads its own pages until it reaches them.
 *
 * No timer belongs to the hub: each reader waits with its own timer and the first one due runs
 * the poll, the others take its result. On Workers a timer or a fetch lives in the request that
 * made it, so a hub-owned loop would die with the first reader's request; here a reader that
 * leaves hands its poll over (the next reader due starts a new one).
 */
import type { ReadStreamOptions, ReadStreamResult, StreamChunk } from './read.ts';
import { DEFAULT_STREAM, STREAM_READ_LIMITS } from './limits.ts';

export const STREAM_POLL = {
  /** The poll's delay after chunks arrived. */
  minDelayMs: 100,
  /** The longest delay while the stream is silent (doubling from minDelayMs). */
  maxDelayMs: 2000,
  /** Chunks kept in memory per stream, for readers that arrive or resume within them. */
  windowChunks: 1000,
  /** …and about this many bytes of JSON (at least the newest chunk): 1 MiB. */
  windowBytes: 1024 * 1024,
  /** A poll under way this long is taken as lost (its request ended): the next reader due starts another. */
  staleMs: 15_000,
} as const;

export type ReadPage = (jobId: string, options: ReadStreamOptions) => Promise<ReadStreamResult>;

export interface StreamHubOptions {
  read: ReadPage;
  minDelayMs?: number;
  maxDelayMs?: number;
  windowChunks?: number;
}

export interface StreamReader {
  /**
   * The chunks after this reader's last one (at most 100 at a time), and whether the stream is
   * over. Waits up to `waitMs` for some (0: answers at once, maybe with none); rejects as
   * readStream does (not_found, invalid_request), and on a failed statement.
   */
  next(waitMs: number): Promise<ReadStreamResult>;
  /** The reader is gone: the last one of a stream stops its poll. */
  close(): void;
}

export interface StreamHub {
  open(jobId: string, options?: { name?: string; after?: number }): StreamReader;
  /** Open readers in this process (the skiplock_stream_readers gauge). */
  readers(): number;
}

interface Entry {
  readonly jobId: string;
  readonly name: string;
  readers: number;
  /** Polled at least once: the job exists, and `window` holds every chunk in (start, tail]. */
  known: boolean;
  start: number;
  tail: number;
  window: StreamChunk[];
  /** The JSON size of each chunk in `window`, and their sum. */
  sizes: number[];
  bytes: number;
  done: boolean;
  error: unknown;
  delayMs: number;
  lastPollAt: number;
  inflight: { promise: Promise<void>; owner: object; startedAt: number } | undefined;
  /** Resolved (and replaced) after each poll. */
  changed: { promise: Promise<void>; resolve: () => void };
}

const signal = () => {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
};
/** Resolves when `promise` does or after `ms`, whichever is first; the timer does not outlive it. */
const settledOrAfter = (promise: Promise<void>, ms: number) =>
  new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, ms);
    void promise.then(() => {
      clearTimeout(timer);
      resolve();
    });
  });

interface HubState {
  readonly read: ReadPage;
  readonly minDelayMs: number;
  readonly maxDelayMs: number;
  readonly windowChunks: number;
  readonly entries: Map<string, Entry>;
  open: number;
}

export function createStreamHub(options: StreamHubOptions): StreamHub {
  const hub: HubState = {
    read: options.read,
    minDelayMs: options.minDelayMs ?? STREAM_POLL.minDelayMs,
    maxDelayMs: options.maxDelayMs ?? STREAM_POLL.maxDelayMs,
    windowChunks: options.windowChunks ?? STREAM_POLL.windowChunks,
    entries: new Map(),
    open: 0,
  };
  return { open: (jobId, o = {}) => openReader(hub, jobId, o.name ?? DEFAULT_STREAM, o.after ?? 0), readers: () => hub.open };
}

function openReader(hub: HubState, jobId: string, name: string, after: number): StreamReader {
  const key = `${jobId}\n${name}`;
  let e = hub.entries.get(key);
  if (!e) {
    e = {
      jobId, name, readers: 0, known: false, start: after, tail: after, window: [], sizes: [], bytes: 0, done: false, error: undefined,
      delayMs: hub.minDelayMs, lastPollAt: 0, inflight: undefined, changed: signal(),
    };
    hub.entries.set(key, e);
  }
  const entry = e;
  entry.readers += 1;
  hub.open += 1;
  const me = { cursor: after, closed: false, gone: signal() };
  return {
    next: (waitMs) => nextPage(hub, entry, me, waitMs),
    close() {
      if (me.closed) return;
      me.closed = true;
      me.gone.resolve();
      hub.open -= 1;
      entry.readers -= 1;
      // A poll this reader started may die with its request (Workers): the next reader due starts another.
      if (entry.inflight?.owner === me) entry.inflight = undefined;
      if (entry.readers === 0 && hub.entries.get(key) === entry) hub.entries.delete(key);
    },
  };
}

interface ReaderState {
  cursor: number;
  closed: boolean;
  /** Resolved by close(): a wait under way ends. */
  gone: ReturnType<typeof signal>;
}

/** A reader's next page: from the entry's window, from a page of its own when it is behind it, or after the next poll. */
async function nextPage(hub: HubState, e: Entry, me: ReaderState, waitMs: number): Promise<ReadStreamResult> {
  const until = Date.now() + waitMs;
  for (;;) {
    if (me.closed) return { chunks: [], done: false };
    if (e.known && me.cursor < e.start) {
      // Behind what the hub keeps: a page of its own.
      const page = await hub.read(e.jobId, { name: e.name, after: me.cursor, limit: STREAM_READ_LIMITS.defaultLimit });
      if (page.chunks.length > 0) me.cursor = page.chunks.at(-1)!.seq;
      return page;
    }
    if (e.known) {
      const chunks = e.window.filter((c) => c.seq > me.cursor).slice(0, STREAM_READ_LIMITS.defaultLimit);
      if (chunks.length > 0) me.cursor = chunks.at(-1)!.seq;
      const done = e.done && me.cursor >= e.tail;
      if (chunks.length > 0 || done) return { chunks, done };
    }
    if (e.error !== undefined && !e.known) throw e.error;
    drive(hub, e, me);
    const left = until - Date.now();
    if (left <= 0 && e.known) return { chunks: [], done: false };
    if (e.error !== undefined && !e.inflight) throw e.error;
    // Wait for a poll (ours or another reader's), or until the next one is due, or the wait's end.
    const due = e.inflight ? STREAM_POLL.minDelayMs : Math.max(0, e.lastPollAt + e.delayMs - Date.now());
    await settledOrAfter(Promise.race([e.changed.promise, me.gone.promise]), Math.max(1, e.known ? Math.min(left, due) : due));
  }
}

/** Starts the entry's poll when it is due and none is under way (or the one under way is stale). */
function drive(hub: HubState, entry: Entry, owner: object): void {
  const now = Date.now();
  if (entry.inflight && now - entry.inflight.startedAt < STREAM_POLL.staleMs) return;
  if (entry.done || (entry.known && now - entry.lastPollAt < entry.delayMs)) return;
  const promise = poll(hub, entry, owner);
  entry.inflight = { promise, owner, startedAt: now };
}

/** One poll of the entry, by `owner` (a reader): the chunks after its tail, appended to its window; the delay to the next. */
async function poll(hub: HubState, entry: Entry, owner: object): Promise<void> {
  try {
    const page = await hub.read(entry.jobId, { name: entry.name, after: entry.tail, limit: STREAM_READ_LIMITS.maxLimit });
    append(entry, page, hub.windowChunks);
    entry.error = undefined;
    const full = page.chunks.length >= STREAM_READ_LIMITS.maxLimit; // more are stored: read on at once
    entry.delayMs = full ? 0 : page.chunks.length > 0 ? hub.minDelayMs : Math.min(hub.maxDelayMs, Math.max(hub.minDelayMs, entry.delayMs * 2));
  } catch (error) {
    entry.error = error;
    entry.delayMs = hub.maxDelayMs;
  } finally {
    entry.lastPollAt = Date.now();
    if (entry.inflight?.owner === owner) entry.inflight = undefined;
    const { resolve } = entry.changed;
    entry.changed = signal();
    resolve();
  }
}

/** A poll's page onto the entry: its chunks appended (the window trimmed to its size), its end noted. */
function append(entry: Entry, page: ReadStreamResult, windowChunks: number): void {
  const fresh = page.chunks.filter((c) => c.seq > entry.tail);
  for (const chunk of fresh) {
    const size = JSON.stringify(chunk.data)?.length ?? 4;
    entry.window.push(chunk);
    entry.sizes.push(size);
    entry.bytes += size;
    entry.tail = chunk.seq;
  }
  let drop = 0;
  while (entry.window.length - drop > 1 && (entry.window.length - drop > windowChunks || entry.bytes > STREAM_POLL.windowBytes)) entry.bytes -= entry.sizes[drop++]!;
  if (drop > 0) {
    entry.window.splice(0, drop);
    entry.sizes.splice(0, drop);
    entry.start = entry.window[0]!.seq - 1;
  }
  entry.known = true;
  entry.done = page.done;
}
