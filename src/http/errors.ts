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
