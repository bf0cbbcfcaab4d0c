/**
 * One attempt of a job, as the job's history keeps it (written in SQL by src/store/history.ts,
 * by the same statement that writes the attempt's outcome; the last 20 are kept, oldest first).
 */

/** How an attempt ended. `lease-lost`: its worker stopped renewing the lease and the reaper took the job back. */
/** sleeping: left on its own at ctx.sleep; waiting: at ctx.invoke (WAITING); released: stopped by the worker or yielding between steps. */
export type AttemptOutcome = 'done' | 'retry' | 'dead' | 'released' | 'sleeping' | 'waiting' | 'lease-lost' | 'cancelled';

export const ATTEMPT_OUTCOMES: readonly AttemptOutcome[] = ['done', 'retry', 'dead', 'released', 'sleeping', 'waiting', 'lease-lost', 'cancelled'];

export interface AttemptRecord {
  /** 1 for the first run; a release gives its number back, so the next attempt has it again. */
  attempt: number;
  /** When the attempt was claimed (database clock); null for attempts claimed before history existed. */
  startedAt: Date | null;
  /** When its outcome was written (database clock). */
  endedAt: Date;
  /** endedAt − startedAt; null when startedAt is. */
  durationMs: number | null;
  outcome: AttemptOutcome;
  /** The error, one line, its stack cut off; null for `done`. */
  error: string | null;
  /** The worker that ran it (locked_by). */
  worker: string | null;
  /** What the handler last reported with ctx.progress during this attempt; null when nothing. */
  progress: unknown;
  /** The W3C traceparent of this attempt's span; null without tracing (or when the reaper wrote it). */
  traceparent: string | null;
}

/** The history as the database returns it (jsonb parsed by the driver) into records; anything unexpected is skipped. */
export function parseAttemptHistory(value: unknown): AttemptRecord[] {
  if (!Array.isArray(value)) return [];
  const records: AttemptRecord[] = [];
  for (const entry of value) {
    if (typeof entry !== 'object' || entry === null) continue;
    const e = entry as Record<string, unknown>;
    if (typeof e.attempt !== 'number' || typeof e.endedAt !== 'string') continue;
    records.push({
      attempt: e.attempt,
      startedAt: typeof e.startedAt === 'string' ? new Date(e.startedAt) : null,
      endedAt: new Date(e.endedAt),
      durationMs: typeof e.durationMs === 'number' ? e.durationMs : null,
      outcome: ATTEMPT_OUTCOMES.includes(e.outcome as AttemptOutcome) ? (e.outcome as AttemptOutcome) : 'retry',
      error: typeof e.error === 'string' ? e.error : null,
      worker: typeof e.worker === 'string' ? e.worker : null,
      progress: e.progress ?? null,
      traceparent: typeof e.traceparent === 'string' ? e.traceparent : null,
    });
  }
  return records;
}

/** The row columns withDoneAttempt reads (snake_case, as the driver returns them). */
interface DoneRow {
  status?: unknown;
  attempts?: unknown;
  started_at?: unknown;
  finished_at?: unknown;
  finished_by?: unknown;
  finished_traceparent?: unknown;
  progress?: unknown;
}

const asDate = (v: unknown): Date | null => (v === null || v === undefined ? null : v instanceof Date ? v : new Date(String(v)));

/**
 * The history with a DONE job's last attempt added. The result write stores no entry for a DONE
 * attempt (migration 013: building it per job was a sixth of the claim statement's time); a DONE
 * job is final, so the row itself describes that attempt: its number, started_at, finished_at,
 * progress, and finished_by / finished_traceparent. Jobs finished before migration 013 have the
 * entry stored already (and no finished_by): it is not added twice. The kept history stays at
 * most `limit` attempts, like the stored one.
 */
export function withDoneAttempt(history: AttemptRecord[], row: DoneRow, limit = 20): AttemptRecord[] {
  if (row.status !== 'DONE') return history;
  const attempt = Number(row.attempts);
  const last = history[history.length - 1];
  if (last && last.attempt === attempt && last.outcome === 'done') return history;
  const endedAt = asDate(row.finished_at);
  if (!endedAt) return history;
  const startedAt = asDate(row.started_at);
  const entry: AttemptRecord = {
    attempt,
    startedAt,
    endedAt,
    durationMs: startedAt ? endedAt.getTime() - startedAt.getTime() : null,
    outcome: 'done',
    error: null,
    worker: typeof row.finished_by === 'string' ? row.finished_by : null,
    progress: row.progress ?? null,
    traceparent: typeof row.finished_traceparent === 'string' ? row.finished_traceparent : null,
  };
  return [...history, entry].slice(-limit);
}

/** An attempt record in JSON: ISO times. */
export function attemptToJson(record: AttemptRecord) {
  return { ...record, startedAt: record.startedAt?.toISOString() ?? null, endedAt: record.endedAt.toISOString() };
}
