/** GET /v1/stats: job counts by status and task, and the queue's lag. */
import { createRoute } from '../zod-openapi.ts';
import type { App, RouteDeps } from '../app-types.ts';
import { Stats } from '../schemas/operations.ts';
import { bearerSecurity, errorResponses, jsonContent } from '../schemas/shared.ts';

const statsRoute = createRoute({
  method: 'get',
  operationId: 'stats',
  path: '/v1/stats',
  summary: 'Job counts by status and by task, and the age of the oldest due job',
  tags: ['operations'],
  security: bearerSecurity,
  responses: { 200: jsonContent(Stats, 'Counts'), ...errorResponses(401) },
});

export function registerStatsRoutes(app: App, { skiplock }: RouteDeps): void {
  app.openapi(statsRoute, async (c) => c.json(await skiplock.stats(), 200));
}
