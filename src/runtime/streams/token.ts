/**
 * Stream read tokens (skiplock.streamToken, docs/streams.md "A read token for the browser"):
 * `<jobId>.<expiresAtMs>.<HMAC-SHA-256>` under the deployment's secret, as callback tokens are
 * signed (src/runtime/events/callback-token.ts) but over another message, so neither kind of
 * token is ever the other. It names one job and an expiry, and is checked with no statement.
 * Web Crypto, so it works on Workers.
 */
import { SkiplockError } from '../../core/errors.ts';
import { createHmac, fromBase64Url, toBase64Url } from '../../core/hmac.ts';
import { isJobId } from '../../core/job-id.ts';

export const STREAM_TOKEN_LIMITS = {
  /** A token's default life: one hour. */
  defaultTtlMs: 3_600_000,
  /** The shortest (one second) and the longest (24 hours) life a token may be given. */
  minTtlMs: 1000,
  maxTtlMs: 86_400_000,
} as const;

export interface StreamTokenOptions {
  /**
   * The HMAC key of stream read tokens: at least 16 characters, kept secret. Changing it makes
   * every token handed out before it invalid. Default: `callbacks.secret`. The Cloudflare, Vercel
   * and Node entry points use CALLBACK_SECRET, or else API_TOKEN.
   */
  secret: string;
}

export interface StreamTokenSigner {
  sign(jobId: string, options?: { ttlMs?: number }): Promise<string>;
  /** The job a token names, while it has not expired; null when it is malformed, forged or expired. */
  verify(token: string): Promise<{ jobId: string; expiresAt: Date } | null>;
}

const message = (jobId: string, expiresAt: string) => `skiplock-stream\n${jobId}\n${expiresAt}`;

export function createStreamTokenSigner(options: StreamTokenOptions, now: () => number = Date.now): StreamTokenSigner {
  if (typeof options?.secret !== 'string' || options.secret.length < 16) throw new TypeError('streamTokens.secret must be a string of at least 16 characters');
  const hmac = createHmac(options.secret);
  return {
    async sign(jobId, { ttlMs = STREAM_TOKEN_LIMITS.defaultTtlMs } = {}) {
      if (typeof jobId !== 'string' || !isJobId(jobId)) throw new SkiplockError('invalid_request', 'a job id is a positive integer, as a string', [{ path: ['jobId'], message: 'not a job id' }]);
      const { minTtlMs, maxTtlMs } = STREAM_TOKEN_LIMITS;
      if (typeof ttlMs !== 'number' || !Number.isInteger(ttlMs) || ttlMs < minTtlMs || ttlMs > maxTtlMs)
        throw new SkiplockError('invalid_request', `ttlMs must be an integer from ${minTtlMs} to ${maxTtlMs} (24 hours), got ${String(ttlMs)}`, [{ path: ['ttlMs'], message: 'out of range' }]);
      const expiresAt = String(now() + ttlMs);
      const signature = await hmac.sign(message(jobId, expiresAt));
      return `${jobId}.${expiresAt}.${toBase64Url(signature)}`;
    },
    async verify(token) {
      const parts = typeof token === 'string' ? token.split('.') : [];
      if (parts.length !== 3 || !/^\d{1,19}$/.test(parts[0]!) || !/^\d{1,15}$/.test(parts[1]!)) return null;
      const signature = fromBase64Url(parts[2]!);
      if (!signature || signature.length !== 32 || !(await hmac.verify(signature, message(parts[0]!, parts[1]!)))) return null;
      const expiresAt = Number(parts[1]);
      return expiresAt > now() ? { jobId: parts[0]!, expiresAt: new Date(expiresAt) } : null;
    },
  };
}

/** skiplock.streamToken without a secret: a configuration mistake. */
export function streamTokensNotConfigured(): Error {
  return new TypeError('skiplock.streamToken needs a secret: createSkiplock({ streamTokens: { secret } }) or { callbacks: { secret, publicUrl } } (CALLBACK_SECRET or API_TOKEN on the platform entry points)');
}
