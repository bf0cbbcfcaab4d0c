/**
 * GET or POST /v1/tick: one tick now. Platform crons call it (Vercel sends
 * `Authorization: Bearer $CRON_SECRET` with a GET); so can a person or a deploy script.
 */
import { createRoute } from '@hono/zod-openapi';
import type { App, RouteDeps } from '../app-types.ts';
import { errorResponses, jsonContent, TickResult } from '../schemas.ts';

const tickRoute = (method: 'get' | 'post') =>
  createRoute({
    method,
    path: '/v1/tick',
    summary: 'Run one tick now',
    description: 'Fires due schedules, reaps expired leases, claims and runs due jobs. Accepts API_TOKEN or CRON_SECRET.',
    tags: ['operations'],
    security: [{ bearer: [] }, { cronSecret: [] }],
    responses: { 200: jsonContent(TickResult, 'What the tick did'), ...errorResponses(401) },
  });

export function registerTickRoutes(app: App, { skiplock, tick, arrivedAt }: RouteDeps): void {
  for (const method of ['get', 'post'] as const) {
    // The budget counts from the request's arrival: the platform's limit (Vercel's maxDuration) does.
    app.openapi(tickRoute(method), async (c) => c.json(await skiplock.tick({ ...tick, startedAt: arrivedAt(c) }), 200));
  }
}
