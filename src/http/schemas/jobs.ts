/**
 * The zod schemas of the HTTP API: request envelopes (validated by the routes) and responses
 * (documented in /openapi.json). The enqueue envelope is the library's own enqueueInputSchema.
 */
import { extendZodWithOpenApi } from '../zod-openapi.ts';
import * as z from 'zod';
import { ATTEMPT_OUTCOMES } from '../../core/attempt-history.ts';
import { JOB_STATUSES, STEP_KINDS, STEP_STATUSES } from '../../core/types.ts';
import { unstorableText } from '../../core/json.ts';
import { LIST_LIMIT, rescheduleInputSchema, RETRY_DEAD_LIMIT } from '../../runtime/admin.ts';
import { enqueueInputSchema } from '../../runtime/enqueue.ts';
import { scheduleInputSchema } from '../../runtime/schedule-definition.ts';
import { SCHEDULE_LIST_LIMIT } from '../../runtime/schedules.ts';
import { SCHEDULE_NAME } from '../../core/schedule.ts';
import { CHILD_LIMIT } from '../../store/job-detail.ts';
import { eventNameSchema } from '../../runtime/cancel-on.ts';
import { EVENT_LIMITS, EVENT_LIST_LIMIT, sendEventInputSchema } from '../../runtime/events.ts';

/*
 * The `.openapi` method, before the schemas below use it (importing @hono/zod-openapi extends zod
 * too, but from a module this one need not follow). Only `ZodType` is passed: the whole `z`
 * namespace as a value would keep all of zod, its 63 locales included, in a Worker's bundle.
 */
extendZodWithOpenApi({ ZodType: z.ZodType } as unknown as typeof z);

export const MAX_BATCH = 1000;

/**
 * isTraceparent (src/runtime/tracing.ts) as a pattern, for the document: version, trace id, parent
 * id, flags in lowercase hex; version ff and all-zero ids are invalid.
 */
export const TRACEPARENT_PATTERN = '^(?!ff)[0-9a-f]{2}-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-[0-9a-f]{2}$';

/** A schedule's name (SCHEDULE_NAME) as a pattern, for the document. */
export const SCHEDULE_NAME_PATTERN = SCHEDULE_NAME.source;

/**
 * A JSON value the server always sends (a job's payload, result, progress, a step's output, …):
 * any JSON, null included. Refusing `undefined` makes it required in the document: a bare
 * z.unknown() would be optional there, and generated clients would type it so.
 */
const anyJson = () => z.unknown().refine((value): boolean => value !== undefined); // `: boolean`: not a type guard, its type stays unknown

/** Text that PostgreSQL can store (used for values that reach SQL as text). */
export const storableText = z.string().superRefine((text, ctx) => {
  const problem = unstorableText(text);
  if (problem) ctx.addIssue({ code: 'custom', message: problem });
});

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

export const TaskNameParam = z.object({
  name: storableText.min(1).max(200).openapi({ param: { name: 'name', in: 'path' }, example: 'send-email' }),
});

export const EnqueueBatchInput = z
  .strictObject({ jobs: z.array(EnqueueInput).max(MAX_BATCH) })
  .openapi('EnqueueBatchInput', { description: `Up to ${MAX_BATCH} jobs, enqueued all or none.` });

export const IdempotencyHeader = z.object({
  'idempotency-key': storableText.min(1).max(255).optional().openapi({
    description: 'Same as the body field `idempotencyKey`: a replay returns the original job with 200.',
  }),
});

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

/** The `limit` query parameter of a paged list. */
const pageLimit = (limits: { default: number; max: number }) =>
  z.coerce
    .number()
    .int()
    .min(1)
    .max(limits.max)
    .optional()
    .openapi({ description: `Page size, 1 to ${limits.max}. Default ${limits.default}.` });

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

export const ListSchedulesQuery = z.strictObject({
  limit: pageLimit(SCHEDULE_LIST_LIMIT),
  cursor: z.string().regex(SCHEDULE_NAME).optional().openapi({ description: '`nextCursor` of the previous page.' }),
  prefix: z.string().regex(SCHEDULE_NAME).optional().openapi({ description: 'Only names that start with it (plain characters, no patterns).', example: 'tenant-42-' }),
});

export const ScheduleInput = scheduleInputSchema.clone().openapi('ScheduleInput', {
  description: 'Give exactly one of cron, every, daily (`tz` does not apply to every). The payload is checked against the task’s schema.',
  example: { cron: '0 3 * * *', tz: 'Europe/Oslo', task: 'echo', payload: { message: 'nightly' } },
  // Checked when the timing is parsed (parseTiming), not by the zod schema: stated here for tools.
  oneOf: [{ required: ['cron'] }, { required: ['every'] }, { required: ['daily'] }],
  not: { required: ['every', 'tz'] },
});

// ---- responses

const nullableText = z.string().nullable();
const instant = z.string().openapi({ format: 'date-time' });

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
  })
  .openapi('Job');

export const JobStep = z
  .object({
    id: z.string().openapi({ description: 'The id the handler gave the step' }),
    seq: z.number().int().openapi({ description: 'The order the handler reached it in, from 0' }),
    kind: z.enum(STEP_KINDS),
    status: z.enum(STEP_STATUSES).openapi({ description: 'step: done | failed; sleep: sleeping | done; invoke: waiting | done | failed; event, callback: waiting | done' }),
    output: anyJson().openapi({ description: 'A step’s stored JSON result, or an invoked child’s result' }),
    error: nullableText.openapi({ description: 'Why the step’s last run threw, or why the child ended DEAD or CANCELLED' }),
    attempts: z.number().int().openapi({ description: 'Runs of the step’s fn' }),
    startedAt: instant.nullable(),
    finishedAt: instant.nullable(),
    durationMs: z.number().int().nullable(),
    wakeAt: instant.nullable().openapi({ description: 'sleep: when the job wakes; event, callback: the timeout' }),
    childId: nullableText.openapi({ description: 'invoke: the child job' }),
    childTask: nullableText.openapi({ description: 'invoke: the child’s task' }),
    eventName: nullableText.optional().openapi({ description: 'event: the event name waited for' }),
    eventKey: nullableText.optional().openapi({ description: 'event: the key waited for (null: any key)' }),
    eventId: nullableText.optional().openapi({ description: 'event: the event that completed the wait (null while waiting, or after the timeout)' }),
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

const Counts = z
  .object(Object.fromEntries(JOB_STATUSES.map((status) => [status, z.number().int()])) as Record<(typeof JOB_STATUSES)[number], z.ZodNumber>)
  .openapi('CountsByStatus');

export const Stats = z
  .object({
    counts: Counts,
    byTask: z.record(z.string(), Counts),
    oldestQueuedAgeMs: z.number().openapi({ description: 'How long the longest-waiting due QUEUED job has waited; 0 when none.' }),
    depth: z
      .object({ due: z.number().int(), scheduled: z.number().int(), running: z.number().int(), waiting: z.number().int() })
      .openapi({ description: 'The queue\'s depth, exact: QUEUED jobs due now and not yet (runAt, delay, backoff, debounce), RUNNING, WAITING.' }),
    doneCount: z
      .enum(['exact', 'estimated'])
      .openapi({ description: '`estimated` when more than 10,000 jobs are DONE: counts.DONE (and each task\'s) is then estimated from the table\'s size; every other count is exact.' }),
    unrunnable: z
      .array(z.object({ task: z.string(), queued: z.number().int(), waiting: z.number().int() }))
      .openapi({ description: 'QUEUED or WAITING jobs of tasks this deployment does not register (renamed, removed, or another service’s), by task: nothing here can run them. A deployment knows its own tasks only: another service sharing the table may run them.' }),
  })
  .openapi('Stats');

export const TickResult = z
  .object({
    claimed: z.number().int(),
    done: z.number().int(),
    retried: z.number().int(),
    suspended: z.number().int().openapi({ description: 'Durable steps: jobs that went to sleep, to WAITING for their children, or yielded between steps (no attempt spent).' }),
    dead: z.number().int(),
    cancelled: z.number().int(),
    reaped: z.number().int(),
    fired: z.number().int(),
    staleWrites: z.number().int(),
  })
  .openapi('TickResult');

export const Schedule = z
  .object({
    name: z.string(),
    source: z.enum(['static', 'dynamic']),
    cron: nullableText,
    every: z.number().int().nullable().openapi({ description: 'interval in ms' }),
    daily: z.array(z.string()).nullable(),
    tz: z.string(),
    task: z.string(),
    payload: anyJson(),
    enabled: z.boolean(),
    catchUp: z.enum(['all', 'latest', 'none']),
    overlap: z.enum(['allow', 'skip']),
    maxFiringsPerTick: z.number().int(),
    nextRunAt: instant.nullable(),
    lastFiredAt: instant.nullable(),
    lastScheduledFor: instant.nullable(),
    lastJobId: nullableText,
    lastStatus: z.enum(JOB_STATUSES).nullable(),
    state: anyJson().openapi({ description: 'The recurring state its runs read (ctx.state) and replace (ctx.setState); null until one sets it' }),
  })
  .openapi('Schedule');

export const ScheduleEnvelope = z.object({ schedule: Schedule }).openapi('ScheduleEnvelope');
export const ScheduleList = z
  .object({ schedules: z.array(Schedule), nextCursor: z.string().nullable().openapi({ description: 'null on the last page' }) })
  .openapi('ScheduleList');

export const TaskInfo = z
  .object({
    name: z.string(),
    state: z.enum(['paused', 'active']),
    pausedAt: instant.nullable(),
    counts: Counts,
    debounced: z.number().int().openapi({ description: 'QUEUED jobs waiting on a debounce' }),
  })
  .openapi('Task');

export const TaskEnvelope = z.object({ task: TaskInfo }).openapi('TaskEnvelope');
export const TaskList = z.object({ tasks: z.array(TaskInfo) }).openapi('TaskList');

export const Health = z.object({ ok: z.boolean() }).openapi('Health');

export const DeepHealth = z
  .object({
    ok: z.boolean().openapi({ description: 'The database answered and its schema is the one this skiplock needs (or newer)' }),
    database: z.enum(['up', 'down']),
    schema: z
      .object({
        applied: z.number().int().nullable().openapi({ description: 'The newest migration the database has applied (null: none)' }),
        expected: z.number().int().openapi({ description: 'The newest migration this skiplock ships' }),
        missing: z.array(z.number().int()).openapi({ description: 'Bundled migrations the database lacks' }),
        state: z.enum(['current', 'missing', 'older', 'newer']),
      })
      .nullable()
      .openapi({ description: 'Null when the database did not answer' }),
  })
  .openapi('DeepHealth');

export const ErrorBody = z
  .object({
    error: z.object({
      code: z.enum([
        'unauthorized',
        'invalid_json',
        'invalid_request',
        'unknown_task',
        'invalid_payload',
        'not_found',
        'conflict',
        'payload_too_large',
        'method_not_allowed',
        'too_many_requests',
        'not_configured',
        'not_migrated',
        'internal',
      ]),
      message: z.string(),
      issues: z.array(z.object({ path: z.array(z.union([z.string(), z.number()])), message: z.string() })).optional(),
    }),
  })
  .openapi('Error');

const ERROR_DESCRIPTIONS = {
  400: 'invalid_json, invalid_request, unknown_task or invalid_payload',
  401: 'unauthorized: missing or wrong bearer token',
  404: 'not_found',
  409: 'conflict: the job is not in a state that allows this',
  413: 'payload_too_large',
  429: 'too_many_requests: too many wrong tokens from this address; wait for Retry-After seconds',
  503: 'not_configured (API_TOKEN or another secret missing or too short) or not_migrated (run `npx skiplock migrate`, or pass `autoMigrate`)',
} as const;

/** The error responses of a route, for the OpenAPI document (a route that answers 401 may answer 429 too). */
export function errorResponses<S extends keyof typeof ERROR_DESCRIPTIONS>(...given: S[]) {
  const statuses: (keyof typeof ERROR_DESCRIPTIONS)[] = given.includes(401 as S) && !given.includes(429 as S) ? [...given, 429] : given;
  return Object.fromEntries(
    statuses.map((status) => [status, { description: ERROR_DESCRIPTIONS[status], content: { 'application/json': { schema: ErrorBody } } }]),
  ) as unknown as Record<S, { description: string; content: { 'application/json': { schema: typeof ErrorBody } } }>;
}

export function jsonContent<T extends z.ZodType>(schema: T, description: string) {
  return { description, content: { 'application/json': { schema } } };
}

export const bearerSecurity = [{ bearer: [] as string[] }];

// ---- events (issue 24)

export const SendEventInput = sendEventInputSchema.clone().openapi('SendEventInput', {
  description: `An event: \`name\`, optional \`key\` and \`data\` (JSON, at most ${EVENT_LIMITS.maxDataBytes} bytes), optional \`idempotencyKey\` (the Idempotency-Key header works too).`,
  example: { name: 'order.paid', key: 'o-42', data: { amount: 1200 } },
});

export const SendEventResult = z
  .object({
    id: z.string(),
    woken: z.number().int().openapi({ description: 'Waiting jobs it woke (ctx.waitForEvent)' }),
    started: z.number().int().openapi({ description: 'Jobs it started (tasks defined with `on:` its name)' }),
    pending: z.number().int().openapi({
      description: 'Tasks with `on:` its name that another deployment registered and this one does not define: their jobs are started by that deployment at its next tick (once). 0 when nothing else subscribes.',
    }),
    cancelled: z.number().int().openapi({ description: 'Jobs it cancelled or asked to stop (cancelOn); 0 for a replay' }),
    refused: z.array(z.object({ task: z.string(), message: z.string() })).openapi({ description: '`on:` tasks whose payload schema refused the data' }),
  })
  .openapi('SendEventResult');

export const EventRecord = z
  .object({
    id: z.string(),
    name: z.string(),
    key: z.string().nullable(),
    data: anyJson().openapi({ description: 'null when sent without data' }),
    idempotencyKey: z.string().nullable(),
    createdAt: instant,
    woken: z.number().int(),
    started: z.number().int().openapi({ description: '`on:` jobs started: by the send, and since by the deployments that define the tasks' }),
    pending: z.number().int().openapi({ description: '`on:` jobs still to be started by the deployment that registered their task' }),
    cancelled: z.number().int(),
    refused: z.array(z.object({ task: z.string(), message: z.string() })),
  })
  .openapi('Event');

export const EventPage = z
  .object({ events: z.array(EventRecord), nextCursor: z.string().nullable().openapi({ description: 'null on the last page' }) })
  .openapi('EventPage');

export const ListEventsQuery = z.strictObject({
  name: eventNameSchema.optional(),
  key: storableText.min(1).max(255).optional(),
  limit: pageLimit(EVENT_LIST_LIMIT),
  cursor: z.string().max(100).optional().openapi({ description: '`nextCursor` of the previous page.' }),
});

export const CallbackTokenParam = z.object({
  token: z.string().max(1000).openapi({ param: { name: 'token', in: 'path' }, description: 'The last segment of a URL from ctx.createCallback' }),
});

export const CallbackBody = z.unknown().openapi('CallbackBody', { description: 'Any JSON: the callback’s `data`', example: { approved: true } });

export const CallbackResult = z.object({ ok: z.boolean() }).openapi('CallbackResult');
