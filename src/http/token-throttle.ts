/**
 * Slows down guessing the API token, wherever it is tried: a bearer token on /v1/*, /metrics,
 * /v1/tick or /healthz?deep=1, and the dashboard's login form all count here, one count per
 * source (the client address the platform vouches for, see sourceOf). After a few failures from
 * one source each further attempt must wait twice as long as the last, up to 5 minutes; a success
 * clears the source's count.
 *
 * No one can lock the owner out: a source is only held for its own failures, and is what the
 * platform vouches for (a client cannot claim another's address), and there is deliberately no
 * count over all sources together (failures spread over many addresses would hold everyone). A
 * request whose source is unknown is not throttled, since holding one shared "unknown" would let
 * any stranger hold the owner too.
 *
 * In memory, per instance: on serverless platforms every isolate counts on its own and forgets on
 * recycling, so this bounds the rate per instance, not globally (docs/http-api.md).
 */
import type { SecretPlatform } from './secrets.ts';

export interface TokenThrottleOptions {
  /** Failures allowed from one source before waits begin. Default 5. */
  perClientFree?: number;
  /** The first wait, in ms; each further failure doubles it. Default 1 000. */
  baseMs?: number;
  /** The longest wait, in ms. Default 300 000. */
  maxMs?: number;
  clock?: () => number;
}

export interface TokenThrottle {
  /** How long this source must wait before its next attempt is even checked, in ms (0: now). */
  waitMs(source: string): number;
  failed(source: string): void;
  succeeded(source: string): void;
}

interface Count {
  failures: number;
  until: number;
}

/** Entries kept at most; the oldest go first (a flood of addresses cannot grow memory). */
const MAX_CLIENTS = 10_000;

export function createTokenThrottle(options: TokenThrottleOptions = {}): TokenThrottle {
  const { perClientFree = 5, baseMs = 1_000, maxMs = 300_000, clock = Date.now } = options;
  const counts = new Map<string, Count>();
  return {
    waitMs(source) {
      const count = counts.get(source);
      if (!count) return 0;
      // Forgotten a while after the longest wait has passed.
      if (clock() > count.until + maxMs) counts.delete(source);
      return Math.max(0, count.until - clock());
    },
    failed(source) {
      const failures = (counts.get(source)?.failures ?? 0) + 1;
      const wait = failures <= perClientFree ? 0 : Math.min(maxMs, baseMs * 2 ** (failures - perClientFree - 1));
      counts.delete(source);
      counts.set(source, { failures, until: clock() + wait });
      if (counts.size > MAX_CLIENTS) counts.delete(counts.keys().next().value!);
    },
    succeeded: (source) => void counts.delete(source),
  };
}

/**
 * Who a request comes from, for the throttle: a client address, or undefined when unknown.
 * `env` is what the runtime handed the fetch handler besides the request (Node's `incoming`).
 */
export type SourceOf = (request: Request, env?: unknown) => string | undefined;

/**
 * The client address the platform vouches for:
 * - Cloudflare: `CF-Connecting-IP`, which Cloudflare sets on every request (a client's own is replaced);
 * - Vercel: the last `X-Forwarded-For` entry, the one Vercel's edge wrote (Vercel replaces the
 *   header a client sends; the last entry is the trusted hop even where entries are appended);
 * - Node: the socket's address (@hono/node-server's `incoming`): headers are the client's own
 *   words there. Behind a proxy of your own, every request comes from the proxy: pass
 *   AppOptions.clientAddress to read the header your proxy sets.
 * Without a platform: the socket on Node, Deno's and Bun's remote address, CF-Connecting-IP when
 * the request carries Cloudflare's `cf` object; else unknown.
 */
export function platformSource(platform: SecretPlatform | undefined): SourceOf {
  if (platform === 'cloudflare') return (request) => request.headers.get('cf-connecting-ip') ?? undefined;
  if (platform === 'vercel') return (request) => request.headers.get('x-forwarded-for')?.split(',').at(-1);
  if (platform === 'node') return socketAddress;
  return (request, env) =>
    socketAddress(request, env) ?? ((request as { cf?: unknown }).cf !== undefined ? (request.headers.get('cf-connecting-ip') ?? undefined) : undefined);
}

/** The remote address of the connection, on runtimes that hand it to hono (Node, Deno, Bun). */
function socketAddress(request: Request, env: unknown): string | undefined {
  if (env === undefined || env === null || typeof env !== 'object') return undefined;
  const e = env as { incoming?: { socket?: { remoteAddress?: string } }; remoteAddr?: { hostname?: string }; requestIP?: (request: Request) => { address?: string } | null };
  try {
    return e.incoming?.socket?.remoteAddress ?? e.remoteAddr?.hostname ?? (typeof e.requestIP === 'function' ? e.requestIP(request)?.address : undefined);
  } catch {
    return undefined;
  }
}

/**
 * The throttle's key for an address: IPv4 as is (an IPv4-mapped IPv6 address as its IPv4), IPv6
 * by its /64 (one host's network: an attacker given a /64 holds 2^64 addresses), anything else
 * trimmed and cut to 100 characters. Undefined for an empty or missing address.
 */
export function sourceKey(address: string | undefined): string | undefined {
  const text = address?.trim().toLowerCase().replace(/^\[|\]$/g, '').replace(/%.*$/, '');
  if (!text) return undefined;
  const mapped = /^(?:0*:)*:?ffff:(\d{1,3}(?:\.\d{1,3}){3})$/.exec(text) ?? /^::(\d{1,3}(?:\.\d{1,3}){3})$/.exec(text);
  if (mapped) return mapped[1];
  if (!text.includes(':') || !/^[0-9a-f:.]+$/.test(text)) return text.slice(0, 100);
  const [head = '', tail] = text.split('::');
  const left = head === '' ? [] : head.split(':');
  const right = tail === undefined || tail === '' ? [] : tail.split(':');
  const groups = tail === undefined ? left : [...left, ...Array<string>(Math.max(0, 8 - left.length - right.length)).fill('0'), ...right];
  return `${groups.slice(0, 4).map((g) => (g.replace(/^0+(?=.)/, '') || '0')).join(':')}::/64`;
}
