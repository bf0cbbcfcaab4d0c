import { HISTORY_LIMIT } from './history.ts';
import { attemptToJson, parseAttemptHistory, withDoneAttempt } from '../core/attempt-history.ts';
import type { Job, JobStatus, JobStep, StepKind, StepStatus } from '../core/types.ts';
import type { Row } from './sql.ts';

/** Drivers agree on most types; these accept both parsed and text forms so every driver maps alike. */
export function toDate(value: unknown): Date {
  return value instanceof Date ? value : new Date(String(value));
}

/** A boolean column: parsed (true) or in PostgreSQL's text form ('t'). */
export function toBool(value: unknown): boolean {
  return value === true || value === 't';
}

export function toDateOrNull(value: unknown): Date | null {
  return value === null || value === undefined ? null : toDate(value);
}

// Every driver parses jsonb itself; a JSON string value arrives as a JS string.
export function toJson(value: unknown): unknown {
  return value ?? null;
}

function toStringOrNull(value: unknown): string | null {
  return value === null || value === undefined ? null : String(value);
}

/**
 * A job row as the database returns it (snake_case columns: what running `enqueueStatement`'s
 * statement yourself returns, with any driver) → the `Job` that enqueue returns. Exported from
 * `skiplock` as `jobFromRow`.
 */
export function mapJob(row: Row): Job {
  return {
    id: String(row.id),
    task: String(row.task),
    payload: toJson(row.payload),
    status: row.status as JobStatus,
    priority: Number(row.priority),
    runAt: toDate(row.run_at),
    attempts: Number(row.attempts),
    maxAttempts: Number(row.max_attempts),
    timeoutMs: Number(row.timeout_ms),
    lockedBy: toStringOrNull(row.locked_by),
    lockedUntil: toDateOrNull(row.locked_until),
    cancelRequested: toBool(row.cancel_requested),
    lastError: toStringOrNull(row.last_error),
    result: toJson(row.result),
    idempotencyKey: toStringOrNull(row.idempotency_key),
    scheduleName: toStringOrNull(row.schedule_name),
    scheduledFor: toDateOrNull(row.scheduled_for),
    scheduleState: toJson(row.schedule_state),
    createdAt: toDate(row.created_at),
    updatedAt: toDate(row.updated_at),
    finishedAt: toDateOrNull(row.finished_at),
    startedAt: toDateOrNull(row.started_at),
    history: withDoneAttempt(parseAttemptHistory(row.history), row, HISTORY_LIMIT),
    progress: toJson(row.progress),
    traceparent: toStringOrNull(row.traceparent),
    parentId: toStringOrNull(row.parent_id),
    parentStep: toStringOrNull(row.parent_step),
    pendingChildren: Number(row.pending_children ?? 0),
    stepCount: Number(row.step_count ?? 0),
    fairnessKey: toStringOrNull(row.fair_key),
    batchKey: toStringOrNull(row.batch_key),
  };
}

/** Epoch milliseconds (bigint: a string from pg and Neon alike) → Date; null stays null. */
function fromEpochMs(value: unknown): Date | null {
  return value === null || value === undefined ? null : new Date(Number(value));
}

/**
 * A row of the claim's answer (src/store/claim.ts CLAIMED_COLUMNS) → the same Job that mapJob
 * makes of the row as the claim left it. What the claim itself wrote is filled in here: RUNNING,
 * locked by `lockedBy` (the statement's $2), updated when it started, progress reset; a RUNNING
 * job has no result and no finish time (the job table's CHECKs). Field by field on purpose, beside
 * mapJob rather than through it: mapJob of a spread copy of the row with these filled in cost the
 * tick a quarter of its worker CPU per job (A/B, 7 rounds: 23.2 → 29.3 ms per 1,000 jobs). The driver
 * contract test holds the two to the same Job.
 */
export function mapClaimedJob(row: Row, lockedBy: string): Job {
  const startedAt = fromEpochMs(row.started_at_ms)!;
  return {
    id: String(row.id),
    task: String(row.task),
    payload: toJson(row.payload),
    status: 'RUNNING',
    priority: Number(row.priority),
    runAt: fromEpochMs(row.run_at_ms)!,
    attempts: Number(row.attempts),
    maxAttempts: Number(row.max_attempts),
    timeoutMs: Number(row.timeout_ms),
    lockedBy,
    lockedUntil: fromEpochMs(row.locked_until_ms),
    cancelRequested: toBool(row.cancel_requested),
    lastError: toStringOrNull(row.last_error),
    result: null,
    idempotencyKey: toStringOrNull(row.idempotency_key),
    scheduleName: toStringOrNull(row.schedule_name),
    scheduledFor: fromEpochMs(row.scheduled_for_ms),
    scheduleState: toJson(row.schedule_state),
    createdAt: fromEpochMs(row.created_at_ms)!,
    updatedAt: startedAt,
    finishedAt: null,
    startedAt,
    history: parseAttemptHistory(row.history),
    progress: null,
    traceparent: toStringOrNull(row.traceparent),
    parentId: toStringOrNull(row.parent_id),
    parentStep: toStringOrNull(row.parent_step),
    pendingChildren: Number(row.pending_children ?? 0),
    stepCount: Number(row.step_count ?? 0),
    fairnessKey: toStringOrNull(row.fair_key),
    batchKey: toStringOrNull(row.batch_key),
  };
}

/** A skiplock.job_step row (src/store/steps.ts). */
export function mapJobStep(row: Row): JobStep {
  return {
    id: String(row.id),
    seq: Number(row.seq),
    kind: row.kind as StepKind,
    status: row.status as StepStatus,
    output: toJson(row.output),
    error: toStringOrNull(row.error),
    attempts: Number(row.attempts),
    startedAt: toDateOrNull(row.started_at),
    finishedAt: toDateOrNull(row.finished_at),
    durationMs: row.duration_ms === null || row.duration_ms === undefined ? null : Number(row.duration_ms),
    wakeAt: toDateOrNull(row.wake_at),
    childId: toStringOrNull(row.child_id),
    childTask: toStringOrNull(row.child_task),
    ...(row.kind === 'event' && { eventName: toStringOrNull(row.event_name), eventKey: toStringOrNull(row.event_key), eventId: toStringOrNull(row.event_id) }),
    ...(row.kind === 'any-event' && { eventAlternatives: toAlternatives(row.event_alternatives), eventId: toStringOrNull(row.event_id) }),
  };
}

/** event_alternatives (migration 020): `name` or `name key` (an event name has no space). */
function toAlternatives(tokens: unknown): { event: string; key: string | null }[] {
  return (Array.isArray(tokens) ? tokens : []).map((token) => {
    const text = String(token);
    const space = text.indexOf(' ');
    return space < 0 ? { event: text, key: null } : { event: text.slice(0, space), key: text.slice(space + 1) };
  });
}

/** The JSON shape of a step at the HTTP edge: ISO times, string ids. */
export function jobStepToJson(step: JobStep) {
  return {
    ...step,
    startedAt: step.startedAt?.toISOString() ?? null,
    finishedAt: step.finishedAt?.toISOString() ?? null,
    wakeAt: step.wakeAt?.toISOString() ?? null,
  };
}

/** The JSON shape of a job at the HTTP edge (CONTRACT.md): ISO times, string ids. */
export function jobToJson(job: Job) {
  const { cancelRequested: _cancelRequested, scheduleState: _scheduleState, scheduleName, scheduledFor, ...rest } = job;
  return {
    ...rest,
    runAt: job.runAt.toISOString(),
    lockedUntil: job.lockedUntil?.toISOString() ?? null,
    createdAt: job.createdAt.toISOString(),
    updatedAt: job.updatedAt.toISOString(),
    finishedAt: job.finishedAt?.toISOString() ?? null,
    scheduleName,
    scheduledFor: scheduledFor?.toISOString() ?? null,
    startedAt: job.startedAt?.toISOString() ?? null,
    history: job.history.map(attemptToJson),
  };
}
