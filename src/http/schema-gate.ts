/**
 * Routes that read the database first make sure its schema is skiplock's: a deployment in front
 * of an unmigrated database answers 503 not_migrated (with the fix) instead of 500 internal.
 * The check costs one statement per instance (schema-check.ts); liveness and docs need none.
 */
import type { MiddlewareHandler } from 'hono';
import type { Skiplock } from '../runtime/skiplock.ts';

/** Paths that never touch the database (GET /healthz without ?deep reports liveness only). */
const WITHOUT_DATABASE = new Set(['/healthz', '/openapi.json', '/docs', '/login', '/logout']);

export function requireSchema(skiplock: Skiplock): MiddlewareHandler {
  return async (c, next) => {
    if (!WITHOUT_DATABASE.has(c.req.path)) await skiplock.ensureSchema();
    await next();
  };
}
