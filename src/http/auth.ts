/**
 * Bearer-token auth. Tokens are compared as SHA-256 digests with a loop that always runs to the
 * end, so neither the length nor the first differing byte of a secret leaks through timing.
 */
import type { MiddlewareHandler } from 'hono';
import { SkiplockError } from '../core/errors.ts';

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

/**
 * Lets a request through when its bearer token equals one of `secrets` (empty ones never match);
 * otherwise 401. Every secret is compared, so timing does not reveal which one came close.
 */
export function requireBearer(secrets: readonly (string | undefined)[]): MiddlewareHandler {
  const accepted = secrets.filter((s): s is string => typeof s === 'string' && s.length > 0);
  return async (c, next) => {
    const token = bearerToken(c.req.header('authorization'));
    if (token === undefined) throw new SkiplockError('unauthorized', 'missing bearer token (Authorization: Bearer <API_TOKEN>)');
    const matches = await Promise.all(accepted.map((secret) => safeEqual(token, secret)));
    if (!matches.includes(true)) throw new SkiplockError('unauthorized', 'invalid bearer token');
    await next();
  };
}
