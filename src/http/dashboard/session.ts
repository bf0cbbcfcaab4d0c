/**
 * Dashboard sessions without server state (a serverless app has nowhere to keep them).
 *
 * Logging in with the API token sets a cookie `<expires>.<HMAC(token, "session:" + expires)>`:
 * it proves the holder knew the token without containing it, expires by itself, and every
 * session ends when the token is rotated. Each form carries a CSRF token derived from the
 * cookie (`HMAC(token, "csrf:" + cookie)`), and every POST must also come from this origin.
 */
import type { Context } from 'hono';
import { deleteCookie, getCookie, setCookie } from 'hono/cookie';
import { safeEqual } from '../auth.ts';

export const SESSION_COOKIE = 'skiplock_session';
/** How long a login lasts, in seconds. */
export const SESSION_TTL_SECONDS = 12 * 3600;

const encoder = new TextEncoder();

export interface DashboardSessions {
  /** Sets the session cookie on the response. */
  start(c: Context): Promise<void>;
  /** Clears it. */
  end(c: Context): void;
  /** The request's session cookie when it is valid and unexpired, else undefined. */
  current(c: Context): Promise<string | undefined>;
  /** The CSRF token of a session, for the forms of its pages. */
  csrfToken(session: string): Promise<string>;
  /** True when a POST carries the session's CSRF token and comes from this site (Origin or Referer). */
  isSameSiteAction(c: Context, session: string, submittedToken: string | undefined): Promise<boolean>;
}

export function createDashboardSessions(apiToken: string, clock: () => number = Date.now): DashboardSessions {
  // Imported on first use: a Worker may build the app in global scope, where crypto work is not allowed.
  let key: ReturnType<typeof importKey> | undefined;
  const getKey = () => (key ??= importKey(apiToken));
  const sign = async (message: string) => base64url(new Uint8Array(await crypto.subtle.sign('HMAC', await getKey(), encoder.encode(message))));
  const sessionFor = async (expires: number) => `${expires}.${await sign(`session:${expires}`)}`;

  return {
    async start(c) {
      const expires = Math.floor(clock() / 1000) + SESSION_TTL_SECONDS;
      setCookie(c, SESSION_COOKIE, await sessionFor(expires), {
        path: '/',
        httpOnly: true,
        sameSite: 'Strict',
        secure: isHttps(c),
        maxAge: SESSION_TTL_SECONDS,
      });
    },
    end(c) {
      deleteCookie(c, SESSION_COOKIE, { path: '/', httpOnly: true, sameSite: 'Strict', secure: isHttps(c) });
    },
    async current(c) {
      const value = getCookie(c, SESSION_COOKIE);
      const match = /^(\d{1,12})\.[A-Za-z0-9_-]{43}$/.exec(value ?? '');
      if (!value || !match) return undefined;
      const expires = Number(match[1]);
      // Compared even when expired, so that timing does not tell an old cookie from a forged one.
      const valid = await safeEqual(value, await sessionFor(expires));
      return valid && expires * 1000 > clock() ? value : undefined;
    },
    csrfToken: (session) => sign(`csrf:${session}`),
    async isSameSiteAction(c, session, submittedToken) {
      const tokenMatches = await safeEqual(submittedToken ?? '', await sign(`csrf:${session}`));
      return tokenMatches && submittedToken !== undefined && comesFromThisSite(c);
    },
  };
}

/**
 * Origin (or, when a browser leaves it out, Referer) names this host. Behind a proxy the host is
 * the one the request names, or the proxy's X-Forwarded-Host: a cross-site form cannot set either.
 */
export function comesFromThisSite(c: Context): boolean {
  const source = c.req.header('origin') ?? c.req.header('referer');
  if (source === undefined) return false;
  let host: string;
  try {
    host = new URL(source).host;
  } catch {
    return false; // Includes Origin: null (sandboxed frames, some redirects).
  }
  const hosts = [new URL(c.req.url).host, c.req.header('x-forwarded-host')];
  return host !== '' && hosts.includes(host);
}

function importKey(secret: string) {
  return crypto.subtle.importKey('raw', encoder.encode(secret), { name: 'HMAC', hash: 'SHA-256' }, false, ['sign']);
}

function isHttps(c: Context): boolean {
  return new URL(c.req.url).protocol === 'https:' || c.req.header('x-forwarded-proto') === 'https';
}

function base64url(bytes: Uint8Array): string {
  let text = '';
  for (const byte of bytes) text += String.fromCharCode(byte);
  return btoa(text).replaceAll('+', '-').replaceAll('/', '_').replace(/=+$/, '');
}
