/**
 * The schemas of /v1/jobs (src/http/routes/jobs.ts, versions.ts): the enqueue envelope (the
 * library's own enqueueInputSchema), the lists' queries, and a job as responses send it, with its
 * attempts, steps and children.
 */
import * as z from 'zod';
import { ATTEMPT_OUTCOMES } from '../../core/attempt-history.ts';
import { JOB_STATUSES, STEP_KINDS, STEP_STATUSES } from '../../core/types.ts';
import { rescheduleInputSchema, RETRY_DEAD_LIMIT } from '../../runtime/operations/index.ts';
import { LIST_LIMIT } from '../../runtime/operations/index.ts';
import { enqueueInputSchema } from '../../runtime/tasks/index.ts';
import { CHILD_LIMIT } from '../../store/job-detail.ts';
import { anyJson, IdempotencyHeader, instant, nullableText, pageLimit, storableText } from './shared.ts';

export const MAX_BATCH = 1000;

/**
 * isTraceparent (src/runtime/observability/tracing.ts) as a pattern, for the document: version, trace id, parent
 * id, flags in lowercase hex; version ff and all-zero ids are invalid.
 */
export const TRACEPARENT_PATTERN = '^(?!ff)[0-9a-f]{2}-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-[0-9a-f]{2}$';

// ---- requests

/*
 * clone() first: zod 4 gives a schema the `.openapi` method only if it was built after
 * @hono/zod-openapi extended zod, and the library's schemas may well be built before.
 */
export const EnqueueInput = enqueueInputSchema.clone().openapi('EnqueueInput', {
  description: 'One job. `payload` is checked against the task’s own schema. `runAt` or `delayMs`, not both; `debounce` with neither of them nor `idempotencyKey`.',
  example: { task: 'echo', payload: { message: 'hello' } },
  // What the schema's refinements check, for tools that read the document (zod's refine is not in it).
  not: { anyOf: [{ required: ['runAt', 'delayMs'] }, { required: ['debounce', 'runAt'] }, { required: ['debounce', 'delayMs'] }, { required: ['debounce', 'idempotencyKey'] }] },
  allOf: [{ properties: { traceparent: { type: 'string', pattern: TRACEPARENT_PATTERN } } }],
});

export const RescheduleInput = rescheduleInputSchema.clone().openapi('RescheduleInput', {
  description: 'At least one field; `runAt` or `delayMs`, not both. `payload` is checked against the job’s task; `delayMs: 0` runs it now.',
  example: { delayMs: 0 },
  minProperties: 1,
  not: { required: ['runAt', 'delayMs'] },
});

export const EnqueueBatchInput = z
  .strictObject({ jobs: z.array(EnqueueInput).max(MAX_BATCH) })
  .openapi('EnqueueBatchInput', { description: `Up to ${MAX_BATCH} jobs, enqueued all or none.` });

/** The W3C Trace Context header: the enqueued jobs' attempts descend from it. A malformed one is ignored, as the spec says. */
export const TraceparentHeader = z.object({
  traceparent: z.string().optional().openapi({
    description: 'W3C traceparent: each attempt’s span descends from it (the body field `traceparent` wins). Ignored when malformed.',
    example: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01',
  }),
});

export const EnqueueHeaders = IdempotencyHeader.extend(TraceparentHeader.shape);

/** The longest `?wait=` of POST /v1/jobs, in seconds: under the request limits of every platform skiplock runs on. */
export const MAX_WAIT_SECONDS = 25;

export const EnqueueQuery = z.object({
  wait: z
    .string()
    .regex(/^\d{1,2}(\.\d{1,3})?$/, { message: 'must be a number of seconds, such as 5 or 0.5', abort: true })
    .refine((s) => Number(s) <= MAX_WAIT_SECONDS, `must be at most ${MAX_WAIT_SECONDS} seconds`)
    .optional()
    .openapi({
      description: `Wait up to this many seconds (0 to ${MAX_WAIT_SECONDS}, at most 3 decimals) for the job to finish: 200 with the finished job, or 202 with the job while it still runs. A replay of an idempotency key waits for the original job.`,
      example: '10',
    }),
});

export const JobIdParam = z.object({
  id: z.string().openapi({ param: { name: 'id', in: 'path' }, example: '42' }),
});

/** A status in a query, in any case (`dead`, `DEAD`): the one rule of the HTTP API and the CLI's --status. */
export const jobStatusParam = z
  .preprocess((value) => (typeof value === 'string' ? value.toUpperCase() : value), z.enum(JOB_STATUSES))
  .openapi({ description: `${JOB_STATUSES.join(', ')}; in any case.`, example: 'DEAD' });

export const ListJobsQuery = z.strictObject({
  status: jobStatusParam.optional(),
  task: storableText.min(1).max(200).optional(),
  limit: pageLimit(LIST_LIMIT),
  cursor: z.string().max(100).optional().openapi({ description: '`nextCursor` of the previous page.' }),
});

export const RetryDeadInput = z
  .strictObject({
    task: storableText.min(1).max(200).optional().openapi({ description: 'Only this task’s DEAD jobs; all of them when omitted.' }),
    limit: z.number().int().min(1).max(RETRY_DEAD_LIMIT).optional().openapi({ description: `At most this many, oldest first. Default and most ${RETRY_DEAD_LIMIT}.` }),
  })
  .openapi('RetryDeadInput');

export const RetryDeadResult = z.object({ retried: z.number().int() }).openapi('RetryDeadResult');

// ---- responses

export const AttemptRecord = z
  .object({
    attempt: z.number().int(),
    startedAt: instant.nullable().openapi({ description: 'When it was claimed (database clock); null for attempts older than the history' }),
    endedAt: instant.openapi({ description: 'When its outcome was written (database clock)' }),
    durationMs: z.number().int().nullable(),
    outcome: z.enum(ATTEMPT_OUTCOMES as [string, ...string[]]).openapi({ description: 'lease-lost: its worker stopped renewing the lease and the reaper took the job back' }),
    error: nullableText.openapi({ description: 'One line, its stack cut off' }),
    worker: nullableText,
    progress: anyJson().openapi({ description: 'The last ctx.progress of this attempt; null when none' }),
    traceparent: nullableText.openapi({ description: 'This attempt’s span (W3C traceparent); null without OpenTelemetry' }),
  })
  .openapi('AttemptRecord');

export const Job = z
  .object({
    id: z.string(),
    task: z.string(),
    payload: anyJson(),
    status: z.enum(JOB_STATUSES),
    priority: z.number().int(),
    runAt: instant,
    attempts: z.number().int(),
    maxAttempts: z.number().int(),
    timeoutMs: z.number().int(),
    lockedBy: nullableText,
    lockedUntil: instant.nullable(),
    lastError: nullableText,
    result: anyJson().openapi({ description: 'What the handler returned (DONE); null when nothing' }),
    idempotencyKey: nullableText,
    scheduleName: nullableText,
    scheduledFor: instant.nullable(),
    createdAt: instant,
    updatedAt: instant,
    finishedAt: instant.nullable(),
    startedAt: instant.nullable().openapi({ description: 'When the current (or last) attempt was claimed' }),
    history: z.array(AttemptRecord).openapi({ description: 'The last 20 attempts, oldest first' }),
    progress: anyJson().openapi({ description: 'What the handler last reported with ctx.progress (reset when an attempt starts); null when nothing' }),
    traceparent: nullableText.openapi({ description: 'The W3C traceparent stored at enqueue; each attempt’s span descends from it' }),
    parentId: nullableText.openapi({ description: 'The job whose ctx.invoke enqueued this one; null otherwise' }),
    parentStep: nullableText.openapi({ description: 'The parent’s invoke step id; null without a parent' }),
    pendingChildren: z.number().int().openapi({ description: 'Children this job invoked that have not ended yet (a WAITING job waits for them)' }),
    stepCount: z.number().int().openapi({ description: 'Durable steps recorded (ctx.step, ctx.sleep, ctx.invoke); GET /v1/jobs/{id} lists them' }),
    fairnessKey: nullableText.openapi({ description: 'The key the job takes turns under (fair share); null without one' }),
    batchKey: nullableText.openapi({ description: 'For a job of a batch task: the key its batches are made of ("" without one); null otherwise' }),
  })
  .openapi('Job');

export const JobStep = z
  .object({
    id: z.string().openapi({ description: 'The id the handler gave the step' }),
    seq: z.number().int().openapi({ description: 'The order the handler reached it in, from 0' }),
    kind: z.enum(STEP_KINDS),
    status: z.enum(STEP_STATUSES).openapi({ description: 'step: done | failed; sleep: sleeping | done; invoke: waiting | done | failed; event, callback, any-event: waiting | done' }),
    output: anyJson().openapi({ description: 'A step’s stored JSON result, or an invoked child’s result' }),
    error: nullableText.openapi({ description: 'Why the step’s last run threw, or why the child ended DEAD or CANCELLED' }),
    attempts: z.number().int().openapi({ description: 'Runs of the step’s fn' }),
    startedAt: instant.nullable(),
    finishedAt: instant.nullable(),
    durationMs: z.number().int().nullable(),
    wakeAt: instant.nullable().openapi({ description: 'sleep: when the job wakes; event, callback, any-event: the timeout' }),
    childId: nullableText.openapi({ description: 'invoke: the child job' }),
    childTask: nullableText.openapi({ description: 'invoke: the child’s task' }),
    eventName: nullableText.optional().openapi({ description: 'event: the event name waited for' }),
    eventKey: nullableText.optional().openapi({ description: 'event: the key waited for (null: any key)' }),
    eventId: nullableText.optional().openapi({ description: 'event, any-event: the event that completed the wait (null while waiting, or after the timeout)' }),
    eventAlternatives: z
      .array(z.object({ event: z.string(), key: nullableText }))
      .optional()
      .openapi({ description: 'any-event (ctx.waitForAny): the alternatives waited for, in the handler’s order (key null: any key)' }),
  })
  .openapi('JobStep');

export const JobChild = z
  .object({ id: z.string(), task: z.string(), status: z.enum(JOB_STATUSES), parentStep: z.string().openapi({ description: 'The parent’s invoke step that enqueued it' }) })
  .openapi('JobChild');

export const JobDetail = Job.extend({
  steps: z.array(JobStep).openapi({ description: 'Its durable steps, in the order the handler reached them' }),
  children: z.array(JobChild).openapi({ description: `The jobs it invoked, by id: the first ${CHILD_LIMIT} (its invoke steps name every child)` }),
}).openapi('JobDetail', { description: 'A job with its steps and children: only GET /v1/jobs/{id} loads them; lists of jobs do not.' });

export const JobEnvelope = z.object({ job: Job }).openapi('JobEnvelope');
export const JobDetailEnvelope = z.object({ job: JobDetail }).openapi('JobDetailEnvelope');
export const JobList = z.object({ jobs: z.array(Job) }).openapi('JobList');
export const JobPage = z
  .object({ jobs: z.array(Job), nextCursor: z.string().nullable().openapi({ description: 'null on the last page' }) })
  .openapi('JobPage');
