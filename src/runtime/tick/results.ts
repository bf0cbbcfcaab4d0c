/**
 * The tick's results on their way to the database: each run's outcome as a row of
 * completeAndClaim, the counts of what landed, and which failures are the data's fault.
 */
import type { Outcome } from '../../core/state.ts';
import { statusAfter } from '../../core/state.ts';
import type { Job, TickResult } from '../../core/types.ts';
import type { ResultRow } from '../../store/claim.ts';
import { sqlState } from '../../store/sql.ts';
import type { Logger } from '../observability/log.ts';

export interface PendingResult {
  job: Job;
  outcome: Outcome;
  /** Its batch was refused: written alone, without a claim. */
  suspect?: boolean;
  /** Already rewritten as DEAD after a refusal. */
  rewritten?: boolean;
  /** For the attempt's history entry (src/store/history.ts): the last progress reported, and the attempt's traceparent. */
  progress?: { value: unknown } | undefined;
  trace?: string | null | undefined;
}

/** A run's key: the job and the claim (locked_by) it runs under. */
export function runKey(id: string, lockedBy: string): string {
  return `${id} ${lockedBy}`;
}

export function keyOf(job: Job): string {
  return runKey(job.id, job.lockedBy ?? '');
}

/**
 * An error the database gave for what the statement carries, which sending it again cannot fix:
 * data exceptions (22…), integrity violations (23…), program limits (54…), or a statement that
 * could not even be built (a result JSON.stringify cannot hold).
 */
export function isRefusal(error: unknown): boolean {
  const code = sqlState(error);
  if (code !== undefined) return code.startsWith('22') || code.startsWith('23') || code.startsWith('54');
  return error instanceof RangeError;
}

export function asIds(value: unknown): string[] {
  if (Array.isArray(value)) return value.map(String);
  if (typeof value === 'string') return (JSON.parse(value) as unknown[]).map(String);
  return [];
}

export function toResultRow(job: Job, outcome: Outcome): ResultRow {
  return {
    id: job.id,
    attempt: job.attempts,
    locked_by: job.lockedBy ?? undefined,
    status: statusAfter(outcome) as ResultRow['status'],
    result: outcome.kind === 'done' ? outcome.result : null,
    // A suspension (sleep, wait, a yield between steps) is no error: last_error is kept.
    error: outcome.kind === 'done' || outcome.kind === 'suspend' || outcome.kind === 'wait' ? null : outcome.error,
    delay_ms: outcome.kind === 'retry' ? outcome.delayMs : 0,
    ...((outcome.kind === 'suspend' || outcome.kind === 'wait') && outcome.runAt != null && { run_at: outcome.runAt }),
    ...(outcome.kind === 'wait' && outcome.events && { event_wait: true }),
    release: outcome.kind === 'release' || outcome.kind === 'suspend' || outcome.kind === 'wait',
    state: outcome.kind === 'done' ? outcome.state : undefined,
  };
}

export function tally(counts: TickResult, batch: readonly { job: Job; outcome: Outcome }[], written: Set<string>, cancelled: Set<string>, log: Logger) {
  const stale: string[] = [];
  for (const { job, outcome } of batch) {
    if (!written.has(job.id)) {
      stale.push(job.id);
      continue;
    }
    if (cancelled.has(job.id)) counts.cancelled += 1; // a retry or release of a job whose cancel was asked
    else if (outcome.kind === 'done') counts.done += 1;
    else if (outcome.kind === 'dead') counts.dead += 1;
    else if (outcome.kind === 'cancelled') counts.cancelled += 1;
    else if (outcome.kind === 'suspend' || outcome.kind === 'wait') counts.suspended += 1;
    else counts.retried += 1;
  }
  if (stale.length > 0) {
    counts.staleWrites += stale.length;
    log('warn', 'stale result writes ignored: another worker owns these jobs now', { jobs: stale });
  }
}

/**
 * The results to write now: all of them, except a child's whose parent's result is also pending —
 * a statement can update a row only once, and the child's fan-in updates its parent: the child's
 * result waits for the next batch.
 */
export function takeBatch(pending: PendingResult[]): PendingResult[] {
  // The plain path (no child jobs among the results) builds nothing.
  if (!pending.some((p) => p.job.parentId !== null)) return pending.splice(0);
  const ids = new Set(pending.map((p) => p.job.id));
  const waitsForParent = (p: PendingResult) => p.job.parentId !== null && ids.has(p.job.parentId);
  const now = pending.filter((p) => !waitsForParent(p));
  pending.splice(0, pending.length, ...pending.filter(waitsForParent));
  return now;
}
