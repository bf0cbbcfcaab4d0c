/**
 * Slows down guessing the API token at the dashboard's login: after a few failures from one
 * client (and after many from all clients together, against spoofed addresses), each further
 * attempt must wait twice as long as the last, up to 5 minutes; a success clears the client's count.
 * In memory, per instance: on serverless platforms every isolate counts on its own and forgets on
 * recycling, so this bounds the rate per instance, not globally (docs/operations.md).
 */

export interface LoginThrottleOptions {
  /** Failures allowed from one client before waits begin. Default 5. */
  perClientFree?: number;
  /** Failures allowed from all clients together before waits begin. Default 50. */
  globalFree?: number;
  /** The first wait, in ms; each further failure doubles it. Default 1 000. */
  baseMs?: number;
  /** The longest wait, in ms. Default 300 000. */
  maxMs?: number;
  clock?: () => number;
}

export interface LoginThrottle {
  /** How long this client must wait before its next attempt is even checked, in ms (0: now). */
  waitMs(client: string): number;
  failed(client: string): void;
  succeeded(client: string): void;
}

interface Count {
  failures: number;
  until: number;
}

/** Entries kept at most; the oldest go first (a flood of addresses cannot grow memory). */
const MAX_CLIENTS = 10_000;
const GLOBAL = '\u0000all';

export function createLoginThrottle(options: LoginThrottleOptions = {}): LoginThrottle {
  const { perClientFree = 5, globalFree = 50, baseMs = 1_000, maxMs = 300_000, clock = Date.now } = options;
  const counts = new Map<string, Count>();
  const waitOf = (key: string) => {
    const count = counts.get(key);
    if (!count) return 0;
    // Forgotten a while after the longest wait has passed.
    if (clock() > count.until + maxMs) counts.delete(key);
    return Math.max(0, count.until - clock());
  };
  const fail = (key: string, free: number) => {
    const failures = (counts.get(key)?.failures ?? 0) + 1;
    const wait = failures <= free ? 0 : Math.min(maxMs, baseMs * 2 ** (failures - free - 1));
    counts.delete(key);
    counts.set(key, { failures, until: clock() + wait });
    if (counts.size > MAX_CLIENTS) counts.delete(counts.keys().next().value!);
  };
  return {
    waitMs: (client) => Math.max(waitOf(client), waitOf(GLOBAL)),
    failed(client) {
      fail(client, perClientFree);
      fail(GLOBAL, globalFree);
    },
    succeeded: (client) => void counts.delete(client),
  };
}

/** The client's address as the platform reports it (Cloudflare, Vercel and proxies set these). */
export function clientAddress(header: (name: string) => string | undefined): string {
  return header('cf-connecting-ip') ?? header('x-real-ip') ?? header('x-forwarded-for')?.split(',')[0]?.trim() ?? 'unknown';
}
