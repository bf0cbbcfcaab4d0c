/**
 * Routes that read the database first make sure its schema is skiplock's: a deployment in front
 * of an unmigrated database answers 503 not_migrated (with the fix) instead of 500 internal.
 * The check costs one statement per instance (schema-check.ts); liveness, docs and login need none.
 */
import type { MiddlewareHandler } from 'hono';
import type { Skiplock } from '../runtime/skiplock.ts';

/** For /v1/* and /metrics (the dashboard's pages check it themselves, to answer with an HTML page). */
export function requireSchema(skiplock: Skiplock): MiddlewareHandler {
  return async (_c, next) => {
    await skiplock.ensureSchema();
    await next();
  };
}
