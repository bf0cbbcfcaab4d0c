/**
 * Bearer-token auth. Tokens are compared as SHA-256 digests with a loop that always runs to the
 * end, so neither the length nor the first differing byte of a secret leaks through timing.
 * Failed tokens are counted per source and slowed down (token-throttle.ts): a held source gets
 * 429 with Retry-After, and its token is not even compared.
 */
import type { Context, MiddlewareHandler } from 'hono';
import { SkiplockError } from '../core/errors.ts';
import { errorResponse } from './errors.ts';
import { createTokenThrottle, sourceKey, type SourceOf, type TokenThrottle } from './token-throttle.ts';

const encoder = new TextEncoder();

async function digest(text: string): Promise<Uint8Array> {
  return new Uint8Array(await crypto.subtle.digest('SHA-256', encoder.encode(text)));
}

/** Constant-time equality of two strings (of any lengths). */
export async function safeEqual(a: string, b: string): Promise<boolean> {
  const [x, y] = await Promise.all([digest(a), digest(b)]);
  let difference = 0;
  for (let i = 0; i < x.length; i++) difference |= x[i]! ^ y[i]!;
  return difference === 0;
}

/** The token of an `Authorization: Bearer <token>` header, or undefined. */
export function bearerToken(header: string | undefined): string | undefined {
  const match = /^Bearer +(\S+) *$/i.exec(header ?? '');
  return match?.[1];
}

/** What checking a token said: it matched, it did not (counted), or its source must wait this long first (not checked). */
export type TokenCheck = { ok: true } | { ok: false; waitMs: number };

/** One app's check of every secret a request offers (bearer tokens, the dashboard's login), counted per source. */
export interface TokenGuard {
  /** Whether `token` equals one of `secrets` (empty ones never match); a held source's token is not compared. */
  check(request: Request, env: unknown, token: string, secrets: readonly (string | undefined)[]): Promise<TokenCheck>;
  /**
   * Whether the request's source is held for earlier failures, for a platform's own route that
   * compares a token before the app does (it then leaves the request to the app, which answers 429).
   */
  held(request: Request, env?: unknown): boolean;
}

export function createTokenGuard(sourceOf: SourceOf, throttle: TokenThrottle = createTokenThrottle()): TokenGuard {
  const keyOf = (request: Request, env: unknown) => {
    try {
      return sourceKey(sourceOf(request, env));
    } catch {
      return undefined; // a clientAddress option that throws: unknown, never a 500
    }
  };
  return {
    async check(request, env, token, secrets) {
      const source = keyOf(request, env);
      const waitMs = source === undefined ? 0 : throttle.waitMs(source);
      if (waitMs > 0) return { ok: false, waitMs };
      const accepted = secrets.filter((s): s is string => typeof s === 'string' && s.length > 0);
      // Every secret is compared, so timing does not reveal which one came close.
      const matches = await Promise.all(accepted.map((secret) => safeEqual(token, secret)));
      if (matches.includes(true)) {
        if (source !== undefined) throttle.succeeded(source);
        return { ok: true };
      }
      if (source !== undefined) throttle.failed(source);
      return { ok: false, waitMs: 0 };
    },
    held(request, env) {
      const source = keyOf(request, env);
      return source !== undefined && throttle.waitMs(source) > 0;
    },
  };
}

/** The 429 of a held source, with Retry-After in whole seconds. */
export function tooManyFailures(c: Context, waitMs: number): Response {
  const seconds = Math.max(1, Math.ceil(waitMs / 1000));
  c.header('Retry-After', String(seconds));
  return errorResponse(c, new SkiplockError('too_many_requests', `too many wrong tokens from this address: try again in ${seconds} s`));
}

/**
 * Lets a request through when its bearer token equals one of `secrets` (empty ones never match);
 * otherwise 401, or 429 while its source is held for earlier failures. A request without a token
 * is refused (401) without counting: it guessed nothing.
 */
export function requireBearer(guard: TokenGuard, secrets: readonly (string | undefined)[]): MiddlewareHandler {
  return async (c, next) => {
    const token = bearerToken(c.req.header('authorization'));
    if (token === undefined) throw new SkiplockError('unauthorized', 'missing bearer token (Authorization: Bearer <API_TOKEN>)');
    const checked = await guard.check(c.req.raw, c.env, token, secrets);
    if (!checked.ok) {
      if (checked.waitMs > 0) return tooManyFailures(c, checked.waitMs);
      throw new SkiplockError('unauthorized', 'invalid bearer token');
    }
    await next();
  };
}
