/** /v1/jobs: enqueue (one or a batch), read, list, reschedule, cancel, retry (one, or DEAD jobs in bulk). */
import { createRoute } from '../zod-openapi.ts';
import { SkiplockError } from '../../core/errors.ts';
import { refuseUnfittableTimeouts } from '../../runtime/tasks/index.ts';
import { isTraceparent } from '../../core/traceparent.ts';
import { waitForJob } from '../../runtime/tasks/index.ts';
import { jobDetailToJson } from '../../store/job-detail.ts';
import { jobToJson } from '../../store/rows.ts';
import type { App, RouteDeps } from '../app-types.ts';
import { jsonBody } from '../json-body.ts';
import {
  EnqueueBatchInput,
  EnqueueHeaders,
  EnqueueInput,
  EnqueueQuery,
  JobDetailEnvelope,
  JobEnvelope,
  JobIdParam,
  JobList,
  JobPage,
  ListJobsQuery,
  RescheduleInput,
  RetryDeadInput,
  RetryDeadResult,
  TraceparentHeader,
} from '../schemas/jobs.ts';
import { bearerSecurity, errorResponses, jsonContent } from '../schemas/shared.ts';

const enqueueRoute = createRoute({
  method: 'post',
  operationId: 'enqueue',
  path: '/v1/jobs',
  summary: 'Enqueue one job (and, with ?wait=, wait for its result)',
  description: 'On a deployment that knows its longest tick (AppOptions.maxJobTimeoutMs), a job whose timeoutMs (given, or the task’s) is longer is refused with 400 invalid_request: no tick there could ever claim it.',
  tags: ['jobs'],
  security: bearerSecurity,
  middleware: [jsonBody] as const,
  request: {
    headers: EnqueueHeaders,
    query: EnqueueQuery,
    body: { required: true, content: { 'application/json': { schema: EnqueueInput } } },
  },
  responses: {
    201: jsonContent(JobEnvelope, 'Enqueued'),
    200: jsonContent(JobEnvelope, 'Replay: a job with this idempotency key exists; it is returned unchanged. With debounce: the QUEUED job of that key, updated. With ?wait=: the job finished (DONE, DEAD or CANCELLED)'),
    202: jsonContent(JobEnvelope, 'With ?wait=: the job still runs (or waits) after the wait; poll GET /v1/jobs/{id}'),
    ...errorResponses(400, 401, 413),
  },
});

const enqueueBatchRoute = createRoute({
  method: 'post',
  operationId: 'enqueueBatch',
  path: '/v1/jobs/batch',
  summary: 'Enqueue up to 1000 jobs, all or nothing, in one statement',
  tags: ['jobs'],
  security: bearerSecurity,
  middleware: [jsonBody] as const,
  request: { headers: TraceparentHeader, body: { required: true, content: { 'application/json': { schema: EnqueueBatchInput } } } },
  responses: {
    201: jsonContent(JobList, 'Every job, in input order (an idempotency-key replay returns the original job)'),
    ...errorResponses(400, 401, 413),
  },
});

const getJobRoute = createRoute({
  method: 'get',
  operationId: 'getJob',
  path: '/v1/jobs/{id}',
  summary: 'One job, with its durable steps and children',
  description: 'The job, its durable steps (ctx.step, ctx.sleep, ctx.invoke) in the order its handler reached them, and the jobs it invoked (the first 1000 by id), read in one statement.',
  tags: ['jobs'],
  security: bearerSecurity,
  request: { params: JobIdParam },
  responses: { 200: jsonContent(JobDetailEnvelope, 'The job'), ...errorResponses(401, 404) },
});

const listJobsRoute = createRoute({
  method: 'get',
  operationId: 'listJobs',
  path: '/v1/jobs',
  summary: 'Jobs, newest first, one page at a time',
  description: 'A cheap list: each job without its steps and children (GET /v1/jobs/{id} has them; `stepCount` and `pendingChildren` say whether there are any).',
  tags: ['jobs'],
  security: bearerSecurity,
  request: { query: ListJobsQuery },
  responses: { 200: jsonContent(JobPage, 'One page; pass nextCursor as cursor for the next'), ...errorResponses(400, 401) },
});

const cancelRoute = createRoute({
  method: 'post',
  operationId: 'cancelJob',
  path: '/v1/jobs/{id}/cancel',
  summary: 'Cancel a job',
  description: 'QUEUED or WAITING → CANCELLED (200); a WAITING job’s waiting children are cancelled with it. A RUNNING job is asked to stop (202): its handler is aborted at the next heartbeat.',
  tags: ['jobs'],
  security: bearerSecurity,
  request: { params: JobIdParam },
  responses: {
    200: jsonContent(JobEnvelope, 'Cancelled'),
    202: jsonContent(JobEnvelope, 'Running: asked to stop'),
    ...errorResponses(401, 404, 409),
  },
});

const retryRoute = createRoute({
  method: 'post',
  operationId: 'retryJob',
  path: '/v1/jobs/{id}/retry',
  summary: 'Run a DEAD or CANCELLED job again',
  description: 'Back to QUEUED, due now, with its attempts reset to 0.',
  tags: ['jobs'],
  security: bearerSecurity,
  request: { params: JobIdParam },
  responses: { 200: jsonContent(JobEnvelope, 'Queued again'), ...errorResponses(401, 404, 409) },
});

const rescheduleRoute = createRoute({
  method: 'patch',
  operationId: 'rescheduleJob',
  path: '/v1/jobs/{id}',
  summary: 'Reschedule a QUEUED job, or run it now',
  description: 'Changes the due time (`runAt`, or `delayMs` from now: 0 runs it now), the payload (checked against the task as at enqueue) or the priority of a QUEUED job, in one statement. 409 for a job in any other state (a tick that claimed it first wins), and for a new payload of a job with recorded steps.',
  tags: ['jobs'],
  security: bearerSecurity,
  middleware: [jsonBody] as const,
  request: { params: JobIdParam, body: { required: true, content: { 'application/json': { schema: RescheduleInput } } } },
  responses: { 200: jsonContent(JobEnvelope, 'Rescheduled'), ...errorResponses(400, 401, 404, 409, 413) },
});

const retryDeadRoute = createRoute({
  method: 'post',
  operationId: 'retryDead',
  path: '/v1/jobs/retry-dead',
  summary: 'Run DEAD jobs again, many at once',
  description: 'After the bug that killed them is fixed: up to `limit` DEAD jobs (default and most 1000), oldest first, of one task or of all, go back to QUEUED as a retry does. Call again until `retried` is 0. CANCELLED jobs are left alone.',
  tags: ['jobs'],
  security: bearerSecurity,
  middleware: [jsonBody] as const,
  request: { body: { required: true, content: { 'application/json': { schema: RetryDeadInput } } } },
  responses: { 200: jsonContent(RetryDeadResult, 'How many were queued again'), ...errorResponses(400, 401, 413) },
});

export function registerJobRoutes(app: App, deps: RouteDeps): void {
  registerEnqueueRoutes(app, deps);
  registerReadRoutes(app, deps);
  registerChangeRoutes(app, deps);
}

/** POST /v1/jobs (one job, and with ?wait= its result) and POST /v1/jobs/batch. */
function registerEnqueueRoutes(app: App, deps: RouteDeps): void {
  const { skiplock, maxJobTimeoutMs } = deps;
  // A job no tick of this deployment can claim is refused rather than left waiting forever.
  const refuseUnfittable = (inputs: readonly { task: string; timeoutMs?: number | undefined }[], batch: boolean) => {
    if (maxJobTimeoutMs !== undefined) refuseUnfittableTimeouts(skiplock.tasks, inputs, maxJobTimeoutMs, { batch });
  };

  app.openapi(enqueueRoute, async (c) => {
    const started = performance.now();
    const input = c.req.valid('json');
    const { wait } = c.req.valid('query');
    const headerKey = c.req.valid('header')['idempotency-key'];
    const traceparent = input.traceparent ?? validTraceparent(c.req.valid('header').traceparent);
    if (headerKey !== undefined && input.idempotencyKey !== undefined && headerKey !== input.idempotencyKey)
      throw new SkiplockError('invalid_request', 'the Idempotency-Key header and the idempotencyKey field differ', [
        { path: ['idempotencyKey'], message: 'differs from the Idempotency-Key header' },
      ]);
    refuseUnfittable([input], false);
    const { job, created } = await skiplock.enqueueWithResult({ ...input, idempotencyKey: input.idempotencyKey ?? headerKey, traceparent });
    if (created || (wait !== undefined && job.status === 'QUEUED')) deps.startWork(c);
    if (wait === undefined) return created ? c.json({ job: jobToJson(job) }, 201) : c.json({ job: jobToJson(job) }, 200);
    // The bound counts from the request's start; the job's own tick runs meanwhile (startWork).
    const boundMs = Math.max(0, Math.min(Number(wait) * 1000, deps.maxWaitMs) - (performance.now() - started));
    const waited = await waitForJob(job, boundMs, { read: () => skiplock.getJob(job.id) });
    return waited.finished ? c.json({ job: jobToJson(waited.job) }, 200) : c.json({ job: jobToJson(waited.job) }, 202);
  });

  app.openapi(enqueueBatchRoute, async (c) => {
    const { jobs } = c.req.valid('json');
    refuseUnfittable(jobs, true);
    const traceparent = validTraceparent(c.req.valid('header').traceparent);
    const results = await skiplock.enqueueBatch(traceparent ? jobs.map((job) => ({ traceparent, ...job })) : jobs);
    if (results.some((r) => r.created)) deps.startWork(c);
    return c.json({ jobs: results.map((r) => jobToJson(r.job)) }, 201);
  });
}

/** GET /v1/jobs/{id} and GET /v1/jobs. */
function registerReadRoutes(app: App, { skiplock }: RouteDeps): void {
  app.openapi(getJobRoute, async (c) => {
    const { id } = c.req.valid('param');
    const job = await skiplock.getJobDetail(id);
    if (!job) throw new SkiplockError('not_found', `no job ${JSON.stringify(id)}`);
    return c.json({ job: jobDetailToJson(job) }, 200);
  });

  app.openapi(listJobsRoute, async (c) => {
    const page = await skiplock.listJobs(c.req.valid('query'));
    return c.json({ jobs: page.jobs.map(jobToJson), nextCursor: page.nextCursor }, 200);
  });
}

/** Cancel, reschedule, retry (one job, or DEAD jobs in bulk): a job made due starts at once (startWork). */
function registerChangeRoutes(app: App, deps: RouteDeps): void {
  const { skiplock } = deps;
  app.openapi(cancelRoute, async (c) => {
    const { job, outcome } = await skiplock.cancelJob(c.req.valid('param').id);
    return outcome === 'cancelled' ? c.json({ job: jobToJson(job) }, 200) : c.json({ job: jobToJson(job) }, 202);
  });

  app.openapi(rescheduleRoute, async (c) => {
    const job = await skiplock.rescheduleJob(c.req.valid('param').id, c.req.valid('json'));
    if (job.runAt.getTime() <= Date.now()) deps.startWork(c);
    return c.json({ job: jobToJson(job) }, 200);
  });

  app.openapi(retryDeadRoute, async (c) => {
    const retried = await skiplock.retryDead(c.req.valid('json'));
    if (retried > 0) deps.startWork(c);
    return c.json({ retried }, 200);
  });

  app.openapi(retryRoute, async (c) => {
    const job = await skiplock.retryJob(c.req.valid('param').id);
    deps.startWork(c);
    return c.json({ job: jobToJson(job) }, 200);
  });
}

/** A traceparent header as W3C Trace Context reads it: a malformed one is ignored, not refused. */
function validTraceparent(header: string | undefined): string | undefined {
  const value = header?.trim().toLowerCase();
  return value && isTraceparent(value) ? value : undefined;
}
