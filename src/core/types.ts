import type { AttemptRecord } from './attempt-history.ts';

export const JOB_STATUSES = ['QUEUED', 'RUNNING', 'WAITING', 'DONE', 'DEAD', 'CANCELLED'] as const;
export type JobStatus = (typeof JOB_STATUSES)[number];

/** A job as skiplock hands it to code and to JSON (ids are strings: int8 exceeds JS numbers). */
export interface Job<Payload = unknown> {
  id: string;
  task: string;
  payload: Payload;
  status: JobStatus;
  priority: number;
  runAt: Date;
  attempts: number;
  maxAttempts: number;
  timeoutMs: number;
  lockedBy: string | null;
  lockedUntil: Date | null;
  cancelRequested: boolean;
  lastError: string | null;
  result: unknown;
  idempotencyKey: string | null;
  scheduleName: string | null;
  scheduledFor: Date | null;
  /** For a job fired by a schedule: the schedule's recurring state when it fired (ctx.state). */
  scheduleState?: unknown;
  createdAt: Date;
  updatedAt: Date;
  finishedAt: Date | null;
  /** When the current (or last) attempt was claimed, on the database clock; null before the first. */
  startedAt: Date | null;
  /** The last attempts, oldest first (at most 20): when, how long, how each ended, why, on which worker. */
  history: AttemptRecord[];
  /** What the handler last reported with ctx.progress (reset when an attempt starts); null when nothing. */
  progress: unknown;
  /** The W3C traceparent of the enqueuer's context, which each attempt's span descends from; null when none. */
  traceparent: string | null;
  /** The job whose ctx.invoke enqueued this one, and that invoke's step id; null for a job enqueued otherwise. */
  parentId: string | null;
  parentStep: string | null;
  /** Children this job invoked (ctx.invoke) that have not ended yet. */
  pendingChildren: number;
  /** How many durable steps (ctx.step, ctx.sleep, ctx.invoke) the job has recorded. */
  stepCount: number;
  /** The key it takes turns under (fair share: docs/flow-control.md); null without one. */
  fairnessKey: string | null;
  /** For a job of a task with `batch`: the key its batches are made of ('' without `batch.key`); null otherwise. */
  batchKey: string | null;
}

/**
 * `patch`: a ctx.patched marker (migration 017), stored as `patched:<id>`; `event`, `callback`:
 * ctx.waitForEvent, ctx.createCallback (migration 016); `any-event`: ctx.waitForAny (migration 020).
 */
export const STEP_KINDS = ['step', 'sleep', 'invoke', 'patch', 'event', 'callback', 'any-event'] as const;
export type StepKind = (typeof STEP_KINDS)[number];
export const STEP_STATUSES = ['done', 'failed', 'sleeping', 'waiting'] as const;
export type StepStatus = (typeof STEP_STATUSES)[number];

/** One durable step of a job (migrations/012_durable_steps.sql), in the order the handler reached it. */
export interface JobStep {
  id: string;
  seq: number;
  kind: StepKind;
  /** step: done | failed; sleep: sleeping | done; invoke: waiting | done | failed; patch: done; event, callback, any-event: waiting | done (wakeAt: the timeout). */
  status: StepStatus;
  /** A step's stored output, or an invoked child's result. */
  output: unknown;
  /** Why the step's last run threw, or why the child ended DEAD or CANCELLED. */
  error: string | null;
  /** Runs of the step's fn. */
  attempts: number;
  startedAt: Date | null;
  finishedAt: Date | null;
  durationMs: number | null;
  /** sleep: when the job wakes. */
  wakeAt: Date | null;
  /** invoke: the child job and its task. */
  childId: string | null;
  childTask: string | null;
  /** event (ctx.waitForEvent): the name and key waited for, and the event that completed the wait (null while waiting or after a timeout). */
  eventName?: string | null;
  eventKey?: string | null;
  eventId?: string | null;
  /** any-event (ctx.waitForAny): the alternatives waited for, in the handler's order (key null: any key). */
  eventAlternatives?: { event: string; key: string | null }[];
}

/** A job that ctx.invoke enqueued, as its parent's page lists it. */
export interface JobChild {
  id: string;
  task: string;
  status: JobStatus;
  /** The parent's invoke step that enqueued it. */
  parentStep: string;
}

/** One job with its durable steps (in the order reached) and its children (the first 1000 by id). */
export interface JobDetail extends Job {
  steps: JobStep[];
  children: JobChild[];
}

/** What the tick reports. */
export interface TickResult {
  /** Jobs this tick claimed. */
  claimed: number;
  /** Jobs it finished successfully. */
  done: number;
  /** Jobs it put back in the queue for another attempt (or released at a deadline). */
  retried: number;
  /**
   * Durable steps: jobs that went to sleep (ctx.sleep), to WAITING for their children
   * (ctx.invoke), or yielded between steps near the deadline. None spent an attempt.
   */
  suspended: number;
  /** Jobs it moved to DEAD. */
  dead: number;
  /** Jobs whose RUNNING state it confirmed as CANCELLED. */
  cancelled: number;
  /** Expired leases it returned to the queue (or to DEAD). */
  reaped: number;
  /** Cron firings it inserted. */
  fired: number;
  /** Result writes that changed nothing because another worker owned the job by then. */
  staleWrites: number;
}

export function emptyTickResult(): TickResult {
  return { claimed: 0, done: 0, retried: 0, suspended: 0, dead: 0, cancelled: 0, reaped: 0, fired: 0, staleWrites: 0 };
}

/**
 * The shortest secret accepted (API_TOKEN, CRON_SECRET, METRICS_TOKEN, a deployment's token):
 * 16 characters (a random 16-character token holds ≥ 95 bits).
 */
export const MIN_SECRET_LENGTH = 16;
