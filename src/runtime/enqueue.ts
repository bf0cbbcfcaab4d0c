import { z } from 'zod';
import { SkiplockError, type ErrorIssue } from '../core/errors.ts';
import { findUnstorableJson, unstorableText } from '../core/json.ts';
import type { Job } from '../core/types.ts';
import type { Clock } from '../store/clock.ts';
import { insertJobs, jobsByIdempotencyKey, type NewJobRow } from '../store/jobs.ts';
import { mapJob, toBool } from '../store/rows.ts';
import type { Sql } from '../store/sql.ts';
import { flowKeys } from './flow-key.ts';
import { requireTask, type Task, type TaskRegistry } from './task.ts';

const MAX_DELAY_MS = 366 * 24 * 3600 * 1000;

/** Text PostgreSQL can store (no NUL, no unpaired surrogate). */
const storableString = z.string().superRefine((text, ctx) => {
  const problem = unstorableText(text);
  if (problem) ctx.addIssue({ code: 'custom', message: problem });
});

// Instants are sent to PostgreSQL as ISO strings: those need a four-digit year in UTC (no year 0,
// and past 9999 toISOString() writes +010000-…, which PostgreSQL cannot read).
const FIRST_STORABLE_MS = Date.parse('0001-01-01T00:00:00Z');
const LAST_STORABLE_MS = Date.parse('9999-12-31T23:59:59.999Z');
const storableInstant = z.union([z.date(), z.iso.datetime({ offset: true })]).refine(
  (at) => {
    const ms = new Date(at).getTime();
    return ms >= FIRST_STORABLE_MS && ms <= LAST_STORABLE_MS;
  },
  { message: 'must be between the years 1 and 9999 (UTC)' },
);

/** The options of one enqueue; the HTTP API accepts exactly this shape as JSON. */
export const enqueueInputSchema = z.strictObject({
  task: z.string().min(1).max(200),
  /** Checked against the task's own schema. Omitted means `{}`. */
  payload: z.unknown().optional(),
  /** When the job becomes due (ISO-8601 with offset, or a Date). Default: now. */
  runAt: storableInstant.optional(),
  /** Due this many ms after now (instead of runAt). */
  delayMs: z.number().int().min(0).max(MAX_DELAY_MS).optional(),
  /** Higher runs first. Default: the task's priority. */
  priority: z.number().int().min(-32768).max(32767).optional(),
  /** Default: the task's maxAttempts. */
  maxAttempts: z.number().int().min(1).max(1000).optional(),
  /** Default: the task's timeoutMs. */
  timeoutMs: z.number().int().min(1).max(24 * 3600 * 1000).optional(),
  /** Enqueueing the same key again returns the original job and writes nothing. */
  idempotencyKey: storableString.min(1).max(255).optional(),
}).refine((input) => input.runAt === undefined || input.delayMs === undefined, {
  message: 'give runAt or delayMs, not both',
  path: ['delayMs'],
});

export type EnqueueInput = z.input<typeof enqueueInputSchema>;

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

/** A payload against its task's schema, and storable once parsed: the parsed value, or the issues under `path`. */
export function checkTaskPayload(task: Task, payload: unknown, path: (string | number)[]): { value: unknown } | { issues: ErrorIssue[] } {
  const parsed = task.payload.safeParse(payload);
  if (!parsed.success) return { issues: toIssues(parsed.error, path) };
  const unstorable = findUnstorableJson(parsed.data, path);
  return unstorable ? { issues: [unstorable] } : { value: parsed.data };
}

/** Validates one input completely (envelope, task, payload) into the row to insert. */
function prepare(registry: TaskRegistry, raw: unknown, path: (string | number)[]): NewJobRow {
  const parsed = enqueueInputSchema.safeParse(raw);
  if (!parsed.success) throw new SkiplockError('invalid_request', 'invalid job', toIssues(parsed.error, path));
  const input = parsed.data;
  const task = requireTask(registry, input.task);
  const payload = checkTaskPayload(task, input.payload ?? {}, [...path, 'payload']);
  if ('issues' in payload) throw new SkiplockError('invalid_payload', `invalid payload for task ${task.name}`, payload.issues);
  return {
    task: task.name,
    payload: payload.value,
    priority: input.priority ?? task.priority,
    run_at: input.runAt === undefined ? null : new Date(input.runAt).toISOString(),
    delay_ms: input.delayMs ?? 0,
    max_attempts: input.maxAttempts ?? task.maxAttempts,
    timeout_ms: input.timeoutMs ?? task.timeoutMs,
    idempotency_key: input.idempotencyKey ?? null,
    schedule_name: null,
    scheduled_for: null,
    ...flowKeys(task, payload.value, [...path, 'payload']),
  };
}

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
 * Validates every input, then inserts them all in one statement (all or nothing).
 * Nothing is written unless every job is valid.
 */
export async function enqueueJobs(
  sql: Sql,
  registry: TaskRegistry,
  inputs: readonly unknown[],
  now: Clock = null,
  /** Issue paths start with ['jobs', i] for a batch (even of one job), with nothing for a single enqueue. */
  options: { batch?: boolean } = {},
): Promise<EnqueueResult[]> {
  const batch = options.batch ?? inputs.length > 1;
  const rows = inputs.map((input, i) => prepare(registry, input, batch ? ['jobs', i] : []));
  const keys = new Set<string>();
  for (const [i, row] of rows.entries()) {
    if (row.idempotency_key === null) continue;
    if (keys.has(row.idempotency_key))
      throw new SkiplockError('invalid_request', 'the same idempotency key appears twice in one batch', [
        { path: ['jobs', i, 'idempotencyKey'], message: 'duplicate idempotency key' },
      ]);
    keys.add(row.idempotency_key);
  }
  if (rows.length === 0) return [];

  const returned = await sql.query(insertJobs({ jobs: rows, now }));
  // A key committed by a concurrent enqueue after the statement's snapshot is in neither half of
  // its answer (see insertJobs): read those again, now that they are committed.
  const answered = new Set(returned.map((row) => row.idempotency_key));
  const missing = [...keys].filter((key) => !answered.has(key));
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
