/** Signing in to the dashboard and sending its forms through app.request, as a browser would. */
import type { Skiplock } from '../../src/runtime/skiplock.ts';
import { completeAndClaim } from '../../src/store/claim.ts';
import { API_TOKEN, type TestApp } from './helpers.ts';

export const ORIGIN = 'http://skiplock.test';

export interface FormOptions {
  /** The session cookie pair (`skiplock_session=…`); none when omitted. */
  cookie?: string;
  /** Default: this site's Origin; null sends neither Origin nor Referer. */
  origin?: string | null;
  referer?: string;
  headers?: Record<string, string>;
}

export function postForm(t: TestApp, path: string, fields: Record<string, string>, options: FormOptions = {}): Promise<Response> {
  const headers: Record<string, string> = { 'content-type': 'application/x-www-form-urlencoded', ...options.headers };
  const origin = options.origin === undefined ? ORIGIN : options.origin;
  if (origin !== null) headers.origin = origin;
  if (options.referer !== undefined) headers.referer = options.referer;
  if (options.cookie !== undefined) headers.cookie = options.cookie;
  return Promise.resolve(t.app.request(new Request(`${ORIGIN}${path}`, { method: 'POST', headers, body: new URLSearchParams(fields).toString() })));
}

export function getPage(t: TestApp, path: string, cookie?: string): Promise<Response> {
  return Promise.resolve(t.app.request(new Request(`${ORIGIN}${path}`, { headers: cookie ? { cookie } : {} })));
}

/** Logs in with the API token; resolves to the session cookie pair for later requests. */
export async function logIn(t: TestApp): Promise<string> {
  const res = await postForm(t, '/login', { token: API_TOKEN, next: '/' });
  if (res.status !== 303) throw new Error(`login answered ${res.status}`);
  const cookie = /^(skiplock_session=[^;]+)/.exec(res.headers.get('set-cookie') ?? '')?.[1];
  if (!cookie) throw new Error('login set no session cookie');
  return cookie;
}

/** The CSRF token in the forms of a page. */
export async function csrfOf(t: TestApp, cookie: string, path = '/'): Promise<string> {
  const html = await (await getPage(t, path, cookie)).text();
  const token = /name="csrf" value="([^"]+)"/.exec(html)?.[1];
  if (!token) throw new Error(`no CSRF token on ${path}`);
  return token;
}

/** Claims the due jobs of `task` with the tick's own claim statement, as a worker that then keeps them RUNNING. */
export async function claimAsRunning(skiplock: Skiplock, task: string, limit = 1): Promise<string[]> {
  const rows = await skiplock.sql.query(
    completeAndClaim({ now: null, workerId: 'demo-worker-1', results: [], limit, budgetMs: 3_600_000, tasks: [task], leaseMs: 3_600_000, leaseGraceMs: 3_600_000 }),
  );
  return rows.filter((row) => row.id !== null).map((row) => String(row.id));
}
