/**
 * GET /healthz: liveness, open to all, with no statement (a load balancer's probe must not keep
 * a serverless database awake, nor let strangers make it work). GET /healthz?deep=1 with the API
 * token: the database and its schema version (applied vs this skiplock's).
 */
import { createRoute } from '../zod-openapi.ts';
import * as z from 'zod';
import { SkiplockError } from '../../core/errors.ts';
import type { App, RouteDeps } from '../app-types.ts';
import { bearerToken, tooManyFailures } from '../auth.ts';
import { DeepHealth, Health } from '../schemas/operations.ts';
import { bearerSecurity, errorResponses, jsonContent } from '../schemas/shared.ts';

/** A database that does not answer within this is down, as far as a health check can tell. */
export const HEALTH_TIMEOUT_MS = 5_000;

const healthRoute = createRoute({
  method: 'get',
  operationId: 'health',
  path: '/healthz',
  summary: 'Liveness (no auth, no database); ?deep=1 with the API token: the database and its schema',
  tags: ['operations'],
  request: { query: z.object({ deep: z.enum(['0', '1', 'true', 'false']).optional().openapi({ description: 'Another value is 400 invalid_request' }) }) },
  responses: {
    200: jsonContent(z.union([Health, DeepHealth]), 'Alive; with ?deep=1: the database answered and has the schema this skiplock needs'),
    503: jsonContent(DeepHealth, `?deep=1: the database failed, did not answer within ${HEALTH_TIMEOUT_MS / 1000} s, or lacks migrations`),
    ...errorResponses(400, 401),
  },
  security: [{}, ...bearerSecurity],
});

export function registerHealthRoutes(app: App, { skiplock, apiToken, tokenGuard }: RouteDeps): void {
  app.openapi(healthRoute, async (c) => {
    const { deep } = c.req.valid('query');
    if (deep !== '1' && deep !== 'true') return c.json({ ok: true }, 200);
    const token = bearerToken(c.req.header('authorization'));
    const checked = token === undefined ? undefined : await tokenGuard.check(c.req.raw, c.env, token, [apiToken]);
    if (checked && !checked.ok && checked.waitMs > 0) return tooManyFailures(c, checked.waitMs) as never; // a 429 the route's typed responses do not list
    if (!checked?.ok) throw new SkiplockError('unauthorized', 'GET /healthz?deep=1 needs Authorization: Bearer <API_TOKEN>');
    let timer: ReturnType<typeof setTimeout> | undefined;
    try {
      const schema = await Promise.race([
        skiplock.schemaStatus(),
        new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`no answer within ${HEALTH_TIMEOUT_MS} ms`)), HEALTH_TIMEOUT_MS))),
      ]);
      const ok = schema.state === 'current' || schema.state === 'newer';
      return c.json({ ok, database: 'up' as const, schema }, ok ? 200 : 503);
    } catch (error) {
      console.error('[skiplock] health check failed', error);
      return c.json({ ok: false, database: 'down' as const, schema: null }, 503);
    } finally {
      clearTimeout(timer);
    }
  });
}
