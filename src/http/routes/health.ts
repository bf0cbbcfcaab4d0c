/** GET /healthz: open to all, for load balancers and uptime checks. */
import { createRoute } from '@hono/zod-openapi';
import type { App, RouteDeps } from '../app-types.ts';
import { Health, jsonContent } from '../schemas.ts';

/** A database that does not answer within this is down, as far as a health check can tell. */
export const HEALTH_TIMEOUT_MS = 5_000;

const healthRoute = createRoute({
  method: 'get',
  path: '/healthz',
  summary: 'Whether the database answers (no auth)',
  tags: ['operations'],
  responses: {
    200: jsonContent(Health, 'The database answered'),
    503: jsonContent(Health, `The database failed or did not answer within ${HEALTH_TIMEOUT_MS / 1000} s`),
  },
});

export function registerHealthRoutes(app: App, { skiplock }: RouteDeps): void {
  app.openapi(healthRoute, async (c) => {
    let timer: ReturnType<typeof setTimeout> | undefined;
    try {
      await Promise.race([
        skiplock.ping(),
        new Promise((_, reject) => (timer = setTimeout(() => reject(new Error(`no answer within ${HEALTH_TIMEOUT_MS} ms`)), HEALTH_TIMEOUT_MS))),
      ]);
      return c.json({ ok: true }, 200);
    } catch (error) {
      // The cause goes to the log, not to an unauthenticated caller.
      console.error('[skiplock] health check failed', error);
      return c.json({ ok: false }, 503);
    } finally {
      clearTimeout(timer);
    }
  });
}
