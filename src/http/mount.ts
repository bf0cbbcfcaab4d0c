/**
 * The HTTP app under a path prefix, for projects that serve their own routes beside it. The app
 * itself always sees unprefixed paths (`/v1/jobs`, `/jobs/7`): requests under the prefix are
 * forwarded with the prefix cut off, and what the app sends back that points into itself (the
 * dashboard's links and forms, redirects) gets the prefix put back. So the API, the tick route
 * with CRON_SECRET and the dashboard all work under `/skiplock` or `/api/skiplock`.
 */
import { Hono, type Context } from 'hono';
import type { App } from './app-types.ts';

/**
 * The prefix a forwarded request was mounted under, for what the app writes about itself that is
 * not HTML nor a redirect (the `servers` of /openapi.json). Kept beside the request, not in a
 * header, so that no caller can set it.
 */
export const mountedBasePath = new WeakMap<Request, string>();

/** What a platform hands to a fetch handler besides the request. */
type FetchArgs = [env?: unknown, executionCtx?: unknown];

export interface Mounted {
  /** The normalized prefix: '' (none) or '/a/b' (leading slash, no trailing slash). */
  readonly basePath: string;
  /** Whether the request's path is under the prefix (always true without one). */
  handles(request: Request): boolean;
  /** Answers a request under the prefix (404 for any other path). */
  fetch(request: Request, ...args: FetchArgs): Response | Promise<Response>;
}

export function normalizeBasePath(basePath: string | undefined): string {
  if (basePath === undefined || basePath === '' || basePath === '/') return '';
  if (!/^\/[\w.~%@:/-]*$/.test(basePath)) throw new TypeError(`basePath must be a path like "/skiplock", got ${JSON.stringify(basePath)}`);
  return basePath.replace(/\/+$/, '');
}

export function isUnder(pathname: string, basePath: string): boolean {
  return basePath === '' || pathname === basePath || pathname.startsWith(`${basePath}/`);
}

/** `app` served under `basePath`. */
export function mount(app: App, basePath: string | undefined): Mounted {
  const prefix = normalizeBasePath(basePath);
  return {
    basePath: prefix,
    handles: (request) => isUnder(new URL(request.url).pathname, prefix),
    fetch(request, ...args) {
      if (prefix === '') return app.fetch(request, ...(args as [never, never]));
      const url = new URL(request.url);
      if (!isUnder(url.pathname, prefix)) return new Response(JSON.stringify({ error: { code: 'not_found', message: 'not found' } }), { status: 404, headers: { 'content-type': 'application/json' } });
      return forward(app, request, url, prefix, args);
    },
  };
}

/**
 * The app as a hono sub-app for `parent.route('/prefix', sub)`: the prefix is read from the
 * route it was mounted on, so it needs no option. Also works unmounted.
 */
export function asSubApp(app: App): Hono {
  const sub = new Hono();
  sub.all('*', (c: Context) => {
    const prefix = c.req.routePath.replace(/\/?\*$/, '');
    let executionCtx: unknown;
    try {
      executionCtx = c.executionCtx;
    } catch {
      // none outside Workers
    }
    const args: FetchArgs = [c.env, executionCtx];
    return prefix === '' ? app.fetch(c.req.raw, ...(args as [never, never])) : forward(app, c.req.raw, new URL(c.req.url), prefix, args);
  });
  return sub;
}

async function forward(app: App, request: Request, url: URL, prefix: string, args: FetchArgs): Promise<Response> {
  const inner = new URL(url);
  inner.pathname = url.pathname.slice(prefix.length) || '/';
  // The same request at the inner URL, its body still a stream: the app authenticates before it reads any.
  const forwarded = new Request(inner, request);
  mountedBasePath.set(forwarded, prefix);
  return withPrefix(await app.fetch(forwarded, ...(args as [never, never])), prefix);
}

/**
 * Puts the prefix back on redirects, on the dashboard's own links, forms and assets, and on its
 * session cookie's Path: the cookie is then sent to this mount only, not to the host app's routes
 * nor to another mounted instance (which would overwrite it).
 */
async function withPrefix(response: Response, prefix: string): Promise<Response> {
  const location = response.headers.get('location');
  const isHtml = response.headers.get('content-type')?.startsWith('text/html') ?? false;
  const cookies = response.headers.getSetCookie();
  if (!isHtml && !location?.startsWith('/') && cookies.length === 0) return response;
  const headers = new Headers(response.headers);
  if (cookies.length > 0) {
    headers.delete('set-cookie');
    for (const cookie of cookies) headers.append('set-cookie', cookie.replace(/;\s*Path=\/(?=;|$)/i, `; Path=${prefix}`));
  }
  if (location?.startsWith('/') && !location.startsWith('//')) headers.set('location', prefix + location);
  let body: ConstructorParameters<typeof Response>[0] = response.body;
  if (isHtml && response.body) {
    const html = await response.text();
    body = html.replace(/\b(href|action|src)="\/(?!\/)/g, `$1="${prefix}/`);
    headers.delete('content-length');
  }
  return new Response(body, { status: response.status, statusText: response.statusText, headers });
}
