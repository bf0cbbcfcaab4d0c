/**
 * The wake state on Vercel: one entry of the Runtime Cache (`getCache` from @vercel/functions),
 * best effort. Vercel keeps no state between invocations that skiplock could rely on, and the
 * Runtime Cache has no compare-and-set, so each change is a get, the merge rule of
 * src/runtime/wake/state.ts, then a set. What that costs when it goes wrong, and why nothing is
 * lost (the database stays the truth, DESIGN invariant 9):
 *
 * - the entry is absent (never written, evicted, a new region) or unreadable: read() says
 *   "unknown", so the invocation checks the database once and writes the answer back;
 * - two invocations race: one's change can be overwritten by the other's. A lowered instant lost
 *   that way is work due later (due-now work is started by the enqueue's own tick): it starts at
 *   the next write that sees it, or at the latest at the next safety check (`idleCheckMs`);
 * - the cache is down: reads say unknown (a check of the database per invocation, as before the
 *   wake state), failed writes are logged and dropped.
 *
 * Outside Vercel (`next dev`, `next start`, tests) getCache falls back to a cache in the
 * process's memory, which is what the Node runner keeps too.
 */
import { getCache } from '@vercel/functions';
import { mergeLower, mergeWrite, type WakeState, type WakeStore } from '../../runtime/wake/index.ts';

/** The part of @vercel/functions' RuntimeCache this store uses (a test passes its own). */
export interface RuntimeCacheLike {
  get(key: string): Promise<unknown>;
  set(key: string, value: unknown, options?: { name?: string; ttl?: number; tags?: string[] }): Promise<void>;
}

export interface RuntimeCacheWakeStoreOptions {
  /**
   * The entry's key: one per deployment that shares a database and a task list (see
   * wakeStateKey), so that two projects on one cache never read each other's state.
   */
  key: string;
  /** The cache. Default: `getCache({ namespace: 'skiplock' })`, resolved at each call (it is per request on Vercel). */
  cache?: () => RuntimeCacheLike;
  /** Where a failed cache call is reported. Default console.warn. */
  warn?: (message: string, error: unknown) => void;
  /**
   * A tick's conclusion was stored: `state` as merged, `written` as the tick concluded it (they
   * differ when something lowered the state meanwhile). The Vercel Queues timer arms their
   * instants (queue-timer.ts).
   */
  onWrite?: (state: WakeState, written: Omit<WakeState, 'version'>) => Promise<void>;
}

/** A WakeStore in Vercel's Runtime Cache. */
export function createRuntimeCacheWakeStore(options: RuntimeCacheWakeStoreOptions): WakeStore {
  const { key } = options;
  const cache = options.cache ?? (() => getCache({ namespace: 'skiplock' }));
  const warn = options.warn ?? ((message, error) => console.warn(`[skiplock] ${message}`, error));

  const read = async (): Promise<WakeState | null> => {
    try {
      return asWakeState(await cache().get(key));
    } catch (error) {
      warn('reading the wake state from the Runtime Cache failed; checking the database', error);
      return null;
    }
  };
  const store = async (state: WakeState) => {
    // The name is what Vercel's observability shows for the entry.
    await cache().set(key, state, { name: 'skiplock wake state' }).catch((error: unknown) => warn('writing the wake state to the Runtime Cache failed', error));
  };
  return {
    read,
    lower: async (atMs) => store(mergeLower(await read(), atMs)),
    async write(next, seenVersion) {
      const merged = mergeWrite(await read(), next, seenVersion);
      await store(merged);
      await options.onWrite?.(merged, next);
    },
  };
}

/**
 * The key of a deployment's wake state: its database (host, port and name, not the password) and
 * the tasks and schedules it runs. Two deployments that run different tasks on one database keep
 * different states: one's "nothing due" says nothing about the other's work.
 */
export function wakeStateKey(databaseUrl: string | undefined, tasks: readonly string[], schedules: readonly string[]): string {
  let database = '';
  if (databaseUrl && URL.canParse(databaseUrl)) {
    const url = new URL(databaseUrl);
    database = `${url.hostname}:${url.port}${url.pathname}`;
  }
  return `wake-state:${fnv1a64([database, [...tasks].sort().join(','), [...schedules].sort().join(',')].join('\n'))}`;
}

/** A cached value that is a wake state, or null (absent, or written by something else). */
function asWakeState(value: unknown): WakeState | null {
  if (typeof value !== 'object' || value === null) return null;
  const { dueAt, checkedAt, version } = value as Record<string, unknown>;
  const instant = (v: unknown) => v === null || (typeof v === 'number' && Number.isFinite(v));
  if (!instant(dueAt) || !instant(checkedAt) || typeof version !== 'number' || !Number.isInteger(version)) return null;
  return { dueAt: dueAt as number | null, checkedAt: checkedAt as number | null, version };
}

/** FNV-1a, 64 bits, as hex: a short stable name, not a secret. */
function fnv1a64(text: string): string {
  let hash = 0xcbf29ce484222325n;
  for (const byte of new TextEncoder().encode(text)) hash = BigInt.asUintN(64, (hash ^ BigInt(byte)) * 0x100000001b3n);
  return hash.toString(16).padStart(16, '0');
}
