/**
 * How dashboard requests are handled: pages need a session (else a redirect to the login form),
 * actions also need the session's CSRF token and a same-site Origin (else 403), and every answer
 * is HTML with headers that keep it out of frames and caches and allow only its own script.
 * Errors become HTML pages here, not the API's JSON.
 */
import type { Context, Handler } from 'hono';
import { html } from 'hono/html';
import type { ContentfulStatusCode } from 'hono/utils/http-status';
import { SkiplockError } from '../../core/errors.ts';
import type { RouteDeps } from '../app-types.ts';
import { STATUS_OF } from '../errors.ts';
import type { Html } from './format.ts';
import { layout, type Section } from './layout.ts';
import type { DashboardSessions } from './session.ts';

export interface DashboardDeps extends RouteDeps {
  sessions: DashboardSessions;
}

/** What a page handler gets. */
export interface PageRequest {
  c: Context;
  csrf: string;
  /** The wall clock when the request came in (for "3 min ago"). */
  now: number;
}

export interface PageResult {
  title: string;
  section: Section;
  body: Html;
  notice?: Html | undefined;
  status?: ContentfulStatusCode;
}

/** A GET page: logged out → the login form (then back here); a failure → an HTML error page. */
export function page(deps: DashboardDeps, render: (request: PageRequest) => Promise<PageResult>): Handler {
  return async (c) => {
    const session = await deps.sessions.current(c);
    if (!session) return c.redirect(`/login?next=${encodeURIComponent(pathOf(c))}`, 303);
    const csrf = await deps.sessions.csrfToken(session);
    let result: PageResult;
    try {
      await deps.skiplock.ensureSchema(); // not migrated: a 503 page naming the fix
      // Ages ("3 min ago", a silent schedule) are measured on the database's clock, like everything else.
      result = await render({ c, csrf, now: (await deps.skiplock.currentTime()).getTime() });
    } catch (error) {
      result = failure(c, error);
    }
    return respond(c, result.status ?? 200, (nonce) => layout({ title: result.title, section: result.section, csrf, nonce, notice: result.notice }, result.body));
  };
}

/** A form POST: needs a session, its CSRF token in the `csrf` field, and a same-site Origin or Referer. */
export function action(deps: DashboardDeps, run: (c: Context, form: Record<string, string>) => Promise<Response>): Handler {
  return async (c) => {
    const session = await deps.sessions.current(c);
    if (!session) return c.redirect('/login', 303);
    const form = await readForm(c);
    if (!(await deps.sessions.isSameSiteAction(c, session, form.csrf))) return forbidden(c, await deps.sessions.csrfToken(session));
    return run(c, form);
  };
}

/** Renders an HTML answer with the dashboard's security headers and a fresh script nonce. */
export function respond(c: Context, status: ContentfulStatusCode, render: (nonce: string) => Html): Response | Promise<Response> {
  const nonce = randomToken();
  c.header('Content-Security-Policy', [
    "default-src 'none'",
    "style-src 'unsafe-inline'",
    `script-src 'nonce-${nonce}'`,
    "img-src 'self' data:",
    // The job page's live streams: an EventSource on this app's stream route.
    "connect-src 'self'",
    "form-action 'self'",
    "frame-ancestors 'none'",
    "base-uri 'none'",
  ].join('; '));
  c.header('X-Frame-Options', 'DENY');
  c.header('X-Content-Type-Options', 'nosniff');
  c.header('Referrer-Policy', 'same-origin');
  c.header('Cache-Control', 'no-store');
  return c.html(render(nonce), status);
}

/** A SkiplockError as its status and message; anything else as a 500 that says little (the log has the rest). */
function failure(c: Context, error: unknown): PageResult {
  if (error instanceof SkiplockError) return { title: 'Error', section: 'overview', status: STATUS_OF[error.code], body: errorBody(error.message) };
  console.error('[skiplock] dashboard page failed', c.req.method, c.req.path, error);
  return { title: 'Error', section: 'overview', status: 500, body: errorBody('Something failed on the server; its log has the details.') };
}

function forbidden(c: Context, csrf: string): Response | Promise<Response> {
  const body = errorBody('This form has expired or was sent from another site, so nothing was done. Go back, reload the page and try again.');
  return respond(c, 403, (nonce) => layout({ title: 'Forbidden', csrf, nonce }, body));
}

export function errorBody(message: string): Html {
  return html`<h1>Something is not right</h1><div class="notice error">${message}</div><p><a href="/">Back to the overview</a></p>`;
}

/** The fields of a urlencoded or multipart form, as strings (files and repeated fields dropped). */
async function readForm(c: Context): Promise<Record<string, string>> {
  const type = c.req.header('content-type') ?? '';
  if (!/^(application\/x-www-form-urlencoded|multipart\/form-data)/i.test(type)) return {};
  const body = await c.req.parseBody();
  return Object.fromEntries(Object.entries(body).filter((entry): entry is [string, string] => typeof entry[1] === 'string'));
}

function pathOf(c: Context): string {
  const url = new URL(c.req.url);
  return url.pathname + url.search;
}

/**
 * A path on this site to go back to after a login or an action; anything else (another host,
 * `//host`, `/\host`, a scheme) becomes `fallback`, so the redirect cannot be sent off-site.
 */
export function localPath(value: string | undefined, fallback = '/'): string {
  if (value === undefined || value.length > 2000 || !/^\/(?![/\\])/.test(value) || /[\s\\]/.test(value)) return fallback;
  return value;
}

/** `path` with these query parameters added (replacing any of the same name). */
export function withQuery(path: string, params: Record<string, string>): string {
  const url = new URL(path, 'http://dashboard.invalid');
  for (const [name, value] of Object.entries(params)) url.searchParams.set(name, value);
  return url.pathname + url.search;
}

export function randomToken(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return btoa(String.fromCharCode(...bytes)).replace(/=+$/, '');
}
