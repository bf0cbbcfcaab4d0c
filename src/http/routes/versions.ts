/**
 * Versions and bulk (issue 25): restart a job from a step, and act on every job a filter matches.
 * POST /v1/jobs/{id}/restart and POST /v1/jobs/bulk.
 */
import { createRoute } from '../zod-openapi.ts';
import * as z from 'zod';
import { JOB_STATUSES } from '../../core/types.ts';
import { bulkInputSchema } from '../../runtime/operations/index.ts';
import { jobToJson } from '../../store/rows.ts';
import type { App, RouteDeps } from '../app-types.ts';
import { jsonBody } from '../json-body.ts';
import { JobEnvelope, JobIdParam } from '../schemas/jobs.ts';
import { bearerSecurity, errorResponses, jsonContent, storableText } from '../schemas/shared.ts';

export const RestartInput = z
  .strictObject({
    fromStep: storableText.min(1).max(200).nullable().optional().openapi({
      description: 'The id of the step to restart from, as recorded (a ctx.patched marker is `patched:<id>`): the steps before it are kept, it and the rest forgotten. A step the job has not recorded but this deployment’s code calls (one a deploy inserted) works too: the handler is replayed, read-only, up to it. Omitted or null: every step is forgotten.',
      example: 'fraud-check',
    }),
  })
  .openapi('RestartInput');

export const BulkInput = bulkInputSchema.clone().openapi('BulkInput', {
  description: `\`action\` retry (DEAD, CANCELLED → QUEUED), cancel (QUEUED, WAITING → CANCELLED; RUNNING asked to stop), restart (DEAD, CANCELLED → QUEUED, from \`fromStep\` or from the top; a live job is left alone) or delete (DONE, DEAD, CANCELLED). \`where\` needs at least one of task, status (${JOB_STATUSES.join(', ')}, in any case, or an array), errorContains, createdBefore, createdAfter, key.`,
  example: { action: 'retry', where: { task: 'charge-card', status: 'DEAD', errorContains: 'ECONNRESET' } },
  // The refinements, for tools that read the document: a filter is required, fromStep goes with restart.
  allOf: [{ properties: { where: { type: 'object', minProperties: 1 } } }],
  not: { required: ['fromStep'], properties: { action: { not: { const: 'restart' } } } },
});

export const BulkResult = z
  .object({
    matched: z.number().int().openapi({ description: 'Jobs the filter matched' }),
    changed: z.number().int().openapi({ description: 'Jobs the action changed; 0 with dryRun' }),
    wouldChange: z.number().int().optional().openapi({ description: 'With dryRun only: the jobs the action would change now (nothing was changed)' }),
  })
  .openapi('BulkResult');

const restartRoute = createRoute({
  method: 'post',
  operationId: 'restartJob',
  path: '/v1/jobs/{id}/restart',
  summary: 'Restart a job from one of its steps',
  description: 'For a DEAD or CANCELLED job: keeps the steps recorded before `fromStep`, forgets it and the rest, and queues the job, due now, with fresh attempts; the children of forgotten invokes are cancelled. 404 for no such job or step; 409 for a live job (QUEUED — a job already restarted is one —, WAITING or RUNNING: cancel it first) or a DONE one, so the same request sent twice restarts once.',
  tags: ['jobs'],
  security: bearerSecurity,
  middleware: [jsonBody] as const,
  request: { params: JobIdParam, body: { required: true, content: { 'application/json': { schema: RestartInput } } } },
  responses: { 200: jsonContent(JobEnvelope, 'Queued again'), ...errorResponses(400, 401, 404, 409, 413) },
});

const bulkRoute = createRoute({
  method: 'post',
  operationId: 'bulk',
  path: '/v1/jobs/bulk',
  summary: 'Retry, cancel, restart or delete every job a filter matches',
  description: 'In chunks of 1000 ids, each changed like a person’s single action (the state and the whole filter are checked again by the statement that changes it): a RUNNING job is asked to stop, never overwritten, a restarted job is not restarted again, and running it twice changes nothing the second time. Jobs created after the call began are left alone. `dryRun` counts and writes nothing: `changed` is 0 and `wouldChange` what it would change.',
  tags: ['jobs'],
  security: bearerSecurity,
  middleware: [jsonBody] as const,
  request: { body: { required: true, content: { 'application/json': { schema: BulkInput } } } },
  responses: { 200: jsonContent(BulkResult, 'What matched and what changed'), ...errorResponses(400, 401, 413) },
});

export function registerVersionRoutes(app: App, deps: RouteDeps): void {
  const { skiplock } = deps;
  app.openapi(restartRoute, async (c) => {
    const job = await skiplock.restartJob(c.req.valid('param').id, { fromStep: c.req.valid('json').fromStep ?? null });
    deps.startWork(c);
    return c.json({ job: jobToJson(job) }, 200);
  });
  app.openapi(bulkRoute, async (c) => {
    const input = c.req.valid('json');
    const result = await skiplock.bulk(input);
    if (!input.dryRun && result.changed > 0 && (input.action === 'retry' || input.action === 'restart')) deps.startWork(c);
    return c.json(result, 200);
  });
}
