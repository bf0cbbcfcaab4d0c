/** GET /metrics: Prometheus text (needs the API token, like /v1/*). */
import { createRoute } from '../zod-openapi.ts';
import * as z from 'zod';
import { flowControlGauges } from '../../store/admin.ts';
import { toBool } from '../../store/rows.ts';
import type { App, RouteDeps } from '../app-types.ts';
import { PROMETHEUS_CONTENT_TYPE, renderMetrics } from '../prometheus.ts';
import { bearerSecurity, errorResponses } from '../schemas/shared.ts';

const metricsRoute = createRoute({
  method: 'get',
  operationId: 'metrics',
  path: '/metrics',
  summary: 'Prometheus metrics',
  description: 'Job gauges from the database (with paused tasks and debounced jobs); tick counters (claims, completions, retries, dead, stale writes, durations), stream chunks written and open stream readers of this isolate.',
  tags: ['operations'],
  security: bearerSecurity,
  responses: {
    200: { description: 'Prometheus text format 0.0.4', content: { 'text/plain': { schema: z.string() } } },
    ...errorResponses(401),
  },
});

export function registerMetricsRoutes(app: App, { skiplock, streams }: RouteDeps): void {
  app.openapi(metricsRoute, async (c) => {
    const [stats, flow, limits] = await Promise.all([skiplock.stats(), skiplock.sql.query(flowControlGauges()), skiplock.flowStatus()]);
    const gauges = flow.map((row) => ({ task: String(row.task), paused: toBool(row.paused), debounced: Number(row.debounced) }));
    const body = renderMetrics(stats, skiplock.tickTotals(), gauges, limits, { chunksWritten: skiplock.streamTotals().chunksWritten, readers: streams.readers() });
    return c.text(body, 200, { 'Content-Type': PROMETHEUS_CONTENT_TYPE });
  });
}
