import * as z from 'zod';
import { SkiplockError, type ErrorIssue } from '../../core/errors.ts';
import { findUnstorableJson } from '../../core/json.ts';
import type { Job } from '../../core/types.ts';
import type { Clock } from '../../store/clock.ts';
import type { NewJobRow } from '../../store/job-row.ts';
import { insertJobs, jobsByIdempotencyKey, upsertDebouncedJob } from '../../store/enqueue.ts';
import { mapJob, toBool } from '../../store/rows.ts';
import type { Row, Sql, Statement } from '../../store/sql.ts';
import { cancelOnEntries } from '../events/cancel-on.ts';
import { jobKeys } from '../flow/keys.ts';
import { requireTask, type Task, type TaskRegistry } from './task.ts';
import { enqueueInputSchema } from './enqueue-input.ts';

export { enqueueInputSchema, MAX_DELAY_MS, storableInstant, type EnqueueInput } from './enqueue-input.ts';

export interface EnqueueResult {
  job: Job;
  /** False when the idempotency key matched an existing job, which is returned instead. */
  created: boolean;
}

export function toIssues(error: z.ZodError, prefix: (string | number)[] = []): ErrorIssue[] {
  return error.issues.map((issue) => ({
    path: [...prefix, ...issue.path.map((p) => (typeof p === 'symbol' ? String(p) : p))],
    message: issue.message,
  }));
}

/**
 * A payload against its task's schema (DESIGN.md invariant 10). What is stored is the payload's
 * JSON form, and what a run hands the handler is the schema's parse of that form: so the form
 * itself must pass the schema now, or the job would fail at run time (a `z.date()` field: its
 * JSON form is a string). Storing the given payload rather than the schema's output keeps a
 * transform from running on its own output. `stored` is the JSON form; `value` its parse (what
 * the handler gets, and what flow keys are computed from); or the issues under `path`.
 */
/** A payload the task's schema refused: `jsonForm` when only its JSON form was (a `z.date()` field, say). */
export interface PayloadRefusal {
  issues: ErrorIssue[];
  jsonForm?: true;
}

export function checkTaskPayload(task: Task, payload: unknown, path: (string | number)[]): { stored: unknown; value: unknown } | PayloadRefusal {
  const given = task.payload.safeParse(payload);
  if (!given.success) return { issues: toIssues(given.error, path) };
  const unstorable = findUnstorableJson(payload, path);
  if (unstorable) return { issues: [unstorable] };
  const text = JSON.stringify(payload) as string | undefined;
  if (text === undefined) return { issues: [{ path, message: 'has no JSON form' }] };
  const stored: unknown = JSON.parse(text);
  const storedUnstorable = findUnstorableJson(stored, path);
  if (storedUnstorable) return { issues: [storedUnstorable] };
  const parsed = task.payload.safeParse(stored);
  if (!parsed.success) {
    return {
      jsonForm: true,
      issues: toIssues(parsed.error, path).map((issue) => ({
        ...issue,
        message: `${issue.message} (in the payload's JSON form, which is what is stored and what every run parses: use z.coerce.date() or a string for a Date)`,
      })),
    };
  }
  return { stored, value: parsed.data };
}

/** Validates one input completely (envelope, task, payload) into the row to insert. */
function prepare(registry: TaskRegistry, raw: unknown, path: (string | number)[], traceparent: string | undefined): NewJobRow & { debounce?: DebounceOption | undefined } {
  const parsed = enqueueInputSchema.safeParse(raw);
  if (!parsed.success) throw new SkiplockError('invalid_request', 'invalid job', toIssues(parsed.error, path));
  const input = parsed.data;
  const task = requireTask(registry, input.task);
  const payload = checkTaskPayload(task, input.payload ?? {}, [...path, 'payload']);
  if ('issues' in payload) throw new SkiplockError('invalid_payload', payloadMessage(task, payload), payload.issues);
  return {
    task: task.name,
    payload: payload.stored,
    priority: input.priority ?? task.priority,
    run_at: input.runAt === undefined ? null : new Date(input.runAt).toISOString(),
    delay_ms: input.delayMs ?? 0,
    max_attempts: input.maxAttempts ?? task.maxAttempts,
    timeout_ms: input.timeoutMs ?? task.timeoutMs,
    idempotency_key: input.idempotencyKey ?? null,
    schedule_name: null,
    scheduled_for: null,
    traceparent: input.traceparent ?? traceparent ?? null,
    debounce: input.debounce,
    ...jobKeys(task, payload.value, [...path, 'payload'], fairnessKeyFor(task, input.fairnessKey, path)),
    ...cancelOnField(cancelOnEntries(task, payload.value, input.cancelOn)),
  };
}

/** An enqueue's fairnessKey, refused for a task whose jobs are claimed in batches (they take turns by batch). */
function fairnessKeyFor(task: Task, key: string | undefined, path: (string | number)[]): string | undefined {
  if (key !== undefined && task.batch !== undefined)
    throw new SkiplockError('invalid_request', `task ${task.name} runs its jobs in batches: fairnessKey does not apply`, [{ path: [...path, 'fairnessKey'], message: 'not for a batch task' }]);
  return key;
}

/** The message of an invalid_payload error: says so when only the payload's JSON form was refused. */
export function payloadMessage(task: Task, refusal: PayloadRefusal): string {
  return refusal.jsonForm
    ? `invalid payload for task ${task.name}: its JSON form does not pass the task's schema`
    : `invalid payload for task ${task.name}`;
}

/** A job without cancelOn carries no field: its row (and the statement's JSON) stays as before. */
const cancelOnField = (entries: string[] | null) => (entries === null ? {} : { cancel_on: entries });

type DebounceOption = NonNullable<z.output<typeof enqueueInputSchema>['debounce']>;

/**
 * Refuses jobs whose timeout — given, or their task's — is longer than `maxTimeoutMs`, the longest
 * a tick of this deployment can give a job: none of its ticks would ever claim them, so they would
 * wait forever (SkiplockError invalid_request, an issue per job). Jobs of unknown tasks are left
 * to enqueueJobs, which refuses them as unknown_task.
 */
export function refuseUnfittableTimeouts(
  registry: TaskRegistry,
  inputs: readonly { task: string; timeoutMs?: number | undefined }[],
  maxTimeoutMs: number,
  options: { batch?: boolean } = {},
): void {
  const issues: ErrorIssue[] = [];
  let first: number | undefined;
  for (const [i, input] of inputs.entries()) {
    const task = registry.get(input.task);
    const timeoutMs = input.timeoutMs ?? task?.timeoutMs;
    if (!task || timeoutMs === undefined || timeoutMs <= maxTimeoutMs) continue;
    first ??= timeoutMs;
    issues.push({ path: [...(options.batch ? ['jobs', i] : []), 'timeoutMs'], message: `at most ${maxTimeoutMs} here` });
  }
  if (first !== undefined)
    throw new SkiplockError('invalid_request', `timeoutMs ${first} is longer than any tick of this deployment can run (${maxTimeoutMs} ms): the job would never be claimed`, issues);
}

/**
 * Validates every input into the one INSERT statement that enqueues them all (null for none).
 * The single validation path of enqueue, enqueueBatch and enqueueStatement.
 */
export function prepareEnqueue(
  registry: TaskRegistry,
  inputs: readonly unknown[],
  now: Clock = null,
  /** Issue paths start with ['jobs', i] for a batch (even of one job), with nothing for a single enqueue. */
  options: {
    batch?: boolean;
    /** The traceparent of jobs that do not give their own (the caller's active trace context). */
    traceparent?: string | undefined;
  } = {},
): { statement: Statement; rows: NewJobRow[]; debounced: boolean } | null {
  const batch = options.batch ?? inputs.length > 1;
  const rows = inputs.map((input, i) => prepare(registry, input, batch ? ['jobs', i] : [], options.traceparent));
  const keys = new Set<string>();
  for (const [i, row] of rows.entries()) {
    if (row.idempotency_key === null) continue;
    if (keys.has(row.idempotency_key))
      throw new SkiplockError('invalid_request', 'the same idempotency key appears twice in one batch', [
        { path: ['jobs', i, 'idempotencyKey'], message: 'duplicate idempotency key' },
      ]);
    keys.add(row.idempotency_key);
  }
  if (rows.length === 0) return null;
  const debounced = rows.findIndex((row) => row.debounce !== undefined);
  if (debounced === -1) return { statement: insertJobs({ jobs: rows.map(({ debounce: _, ...row }) => row), now }), rows, debounced: false };
  // ON CONFLICT has one arbiter per statement, and a batch may name one key twice: one at a time.
  if (batch)
    throw new SkiplockError('invalid_request', 'debounce is for single enqueues, not batches', [
      { path: ['jobs', debounced, 'debounce'], message: 'not in a batch' },
    ]);
  const { debounce, ...row } = rows[0]!;
  const job = { ...row, delay_ms: debounce!.delayMs, debounce_key: debounce!.key, max_delay_ms: debounce!.maxDelayMs ?? null, keep: debounce!.keep ?? 'last' };
  return { statement: upsertDebouncedJob({ now, job }), rows, debounced: true };
}

/**
 * A debounced enqueue's answer. Its statement found the queued job by the queue's debounce index,
 * but reads that job's record with its own snapshot: a record a concurrent enqueue committed after
 * the snapshot was taken is invisible to it, so the statement answers no row (and a `keep: 'last'`
 * payload was not written). The same statement again, with a new snapshot, sees that record; it
 * changes the queued job as the first did (the same due time, the same keys) and writes the
 * payload. (If the job was claimed in between, it makes a new one, as any later enqueue would.)
 */
async function debouncedAnswer(sql: Sql, statement: Statement, returned: Row[]): Promise<EnqueueResult> {
  for (let attempt = 0; returned.length === 0 && attempt < 5; attempt++) returned = await sql.query(statement);
  if (returned.length === 0) throw new Error('a debounced enqueue found its queued job but never its record');
  return { job: mapJob(returned[0]!), created: toBool(returned[0]!.inserted) };
}

/**
 * Validates every input, then inserts them all in one statement (all or nothing).
 * Nothing is written unless every job is valid.
 */
export async function enqueueJobs(
  sql: Sql,
  registry: TaskRegistry,
  inputs: readonly unknown[],
  now: Clock = null,
  options: Parameters<typeof prepareEnqueue>[3] = {},
): Promise<EnqueueResult[]> {
  const prepared = prepareEnqueue(registry, inputs, now, options);
  if (!prepared) return [];
  const { statement, rows } = prepared;

  const returned = await sql.query(statement);
  if (prepared.debounced) return [await debouncedAnswer(sql, statement, returned)];
  // A key committed by a concurrent enqueue after the statement's snapshot is in neither half of
  // its answer (see insertJobs): read those again, now that they are committed.
  const answered = new Set(returned.map((row) => row.idempotency_key));
  const missing = rows.flatMap((row) => (row.idempotency_key !== null && !answered.has(row.idempotency_key) ? [row.idempotency_key] : []));
  if (missing.length > 0) returned.push(...(await sql.query(jobsByIdempotencyKey({ keys: missing }))));
  // RETURNING has no guaranteed order: match keyed rows by key, the others by id (assigned in input order).
  const byKey = new Map<string, EnqueueResult>();
  const unkeyed: EnqueueResult[] = [];
  for (const row of returned) {
    const result = { job: mapJob(row), created: toBool(row.inserted) };
    // A key's row both inserted and found (the old one deleted by retention in between): the new one.
    if (result.job.idempotencyKey !== null) {
      if (result.created || !byKey.has(result.job.idempotencyKey)) byKey.set(result.job.idempotencyKey, result);
    }
    else unkeyed.push(result);
  }
  unkeyed.sort((a, b) => (BigInt(a.job.id) < BigInt(b.job.id) ? -1 : 1));
  return rows.map((row) => (row.idempotency_key === null ? unkeyed.shift()! : byKey.get(row.idempotency_key)!));
}
