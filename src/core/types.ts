import type { AttemptRecord } from './attempt-history.ts';

export const JOB_STATUSES = ['QUEUED', 'RUNNING', 'DONE', 'DEAD', 'CANCELLED'] as const;
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
}

/** What the tick reports. */
export interface TickResult {
  /** Jobs this tick claimed. */
  claimed: number;
  /** Jobs it finished successfully. */
  done: number;
  /** Jobs it put back in the queue for another attempt. */
  retried: number;
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
  return { claimed: 0, done: 0, retried: 0, dead: 0, cancelled: 0, reaped: 0, fired: 0, staleWrites: 0 };
}
