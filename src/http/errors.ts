/**
 * The one place where errors become HTTP: SkiplockError.code → status, and the body
 * `{"error": {"code", "message", "issues"?}}` of CONTRACT.md for every failure, including
 * those raised by hono itself (malformed JSON, media type, body limit) and unknown routes.
 */
import type { Context, ErrorHandler, NotFoundHandler } from 'hono';
import type { ContentfulStatusCode } from 'hono/utils/http-status';
import { HTTPException } from 'hono/http-exception';
import { SkiplockError, type ErrorCode, type ErrorIssue } from '../core/errors.ts';

export const STATUS_OF: Readonly<Record<ErrorCode, ContentfulStatusCode>> = {
  unauthorized: 401,
  invalid_json: 400,
  invalid_request: 400,
  unknown_task: 400,
  invalid_payload: 400,
  not_found: 404,
  conflict: 409,
  payload_too_large: 413,
  method_not_allowed: 405,
  too_many_requests: 429,
  not_configured: 503,
  not_migrated: 503,
};

/** A 1000-job batch can fail in thousands of places; the first ones are enough to act on. */
const MAX_ISSUES = 100;

export interface ErrorBody {
  error: { code: ErrorCode | 'internal'; message: string; issues?: ErrorIssue[] };
}

export function errorBody(code: ErrorCode | 'internal', message: string, issues?: readonly ErrorIssue[]): ErrorBody {
  return { error: { code, message, ...(issues && issues.length > 0 ? { issues: issues.slice(0, MAX_ISSUES) } : {}) } };
}

export function errorResponse(c: Context, error: SkiplockError): Response {
  const headers: Record<string, string> = error.code === 'unauthorized' ? { 'WWW-Authenticate': 'Bearer' } : {};
  return c.json(errorBody(error.code, error.message, error.issues), STATUS_OF[error.code], headers);
}

/** hono's own 4xx (thrown by its validators and middleware) in skiplock's terms. */
function fromHttpException(error: HTTPException): SkiplockError | undefined {
  if (error.status === 400 && /malformed json/i.test(error.message)) return new SkiplockError('invalid_json', 'the body is not valid JSON');
  if (error.status === 413) return new SkiplockError('payload_too_large', 'the body is too large');
  if (error.status === 415) return new SkiplockError('invalid_request', 'the body must be JSON (Content-Type: application/json)');
  if (error.status === 401) return new SkiplockError('unauthorized', error.message || 'unauthorized');
  if (error.status === 404) return new SkiplockError('not_found', error.message || 'not found');
  if (error.status >= 400 && error.status < 500) return new SkiplockError('invalid_request', error.message || 'invalid request');
  return undefined;
}

export const onError: ErrorHandler = (error, c) => {
  const known = error instanceof SkiplockError ? error : error instanceof HTTPException ? fromHttpException(error) : undefined;
  if (known) return errorResponse(c, known);
  // Anything else is ours (or the database's) to fix, never the caller's: say little, log the rest.
  console.error('[skiplock] request failed', c.req.method, c.req.path, error);
  return c.json(errorBody('internal', 'internal error'), 500);
};

export const onNotFound: NotFoundHandler = (c) =>
  errorResponse(c, new SkiplockError('not_found', `no route ${c.req.method} ${c.req.path}`));

/** A route as hono lists it (`app.routes`): middleware is method ALL. */
interface RouteEntry {
  method: string;
  path: string;
}

/**
 * The methods each path serves, from the app's routes: hono's `:param` segments match any one
 * segment, the rest literally. HEAD goes with GET (hono answers it with GET's headers).
 */
export function methodsByPath(routes: readonly RouteEntry[]): (path: string) => string[] {
  const patterns = new Map<string, { pattern: RegExp; methods: Set<string> }>();
  for (const { method, path } of routes) {
    if (method === 'ALL' || path.includes('*')) continue;
    let entry = patterns.get(path);
    if (!entry) {
      const source = path
        .split('/')
        .map((segment) => (segment.startsWith(':') ? '[^/]+' : segment.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')))
        .join('/');
      patterns.set(path, (entry = { pattern: new RegExp(`^${source}$`), methods: new Set() }));
    }
    entry.methods.add(method.toUpperCase());
    if (method.toUpperCase() === 'GET') entry.methods.add('HEAD');
  }
  return (path) => {
    const methods = new Set<string>();
    for (const entry of patterns.values()) if (entry.pattern.test(path)) for (const m of entry.methods) methods.add(m);
    return [...methods].sort();
  };
}

/**
 * The app's not-found handler: 405 with `Allow` for a path the app serves with other methods
 * (what HTTP clients and fuzzers expect), 404 for any other. `routes` is read on first use: by
 * then every route is there, a project's own added to the app included (hono refuses new routes
 * once it has answered a request).
 */
export function notFoundOrNotAllowed(routes: () => readonly RouteEntry[]): NotFoundHandler {
  let allowed: ((path: string) => string[]) | undefined;
  return (c) => {
    const methods = (allowed ??= methodsByPath(routes()))(c.req.path);
    if (methods.length === 0) return onNotFound(c);
    const allow = methods.join(', ');
    return c.json(errorBody('method_not_allowed', `${c.req.method} is not served on ${c.req.path}; allowed: ${allow}`), 405, { Allow: allow });
  };
}
