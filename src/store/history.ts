/**
 * The attempt history kept with each job (migrations/009_attempt_history.sql): SQL fragments that
 * the statements ending an attempt (the result write, the reaper, the release of unseen claims)
 * put in their own SET, so the history is written by the same statement as the outcome, on the
 * database clock, fenced like it. Inside an UPDATE's SET, `j.*` is the row before the update:
 * `j.attempts`, `j.locked_by` and `j.started_at` are the attempt that is ending.
 */
import { NOW } from './clock.ts';

/** Attempts kept per job; older ones are dropped, so a job that retries forever stays small. */
export const HISTORY_LIMIT = 20;

/** How much of an error's text an entry keeps. */
export const HISTORY_ERROR_CHARS = 1000;

export interface AttemptEntrySql {
  /** SQL text giving the outcome: one of ATTEMPT_OUTCOMES (src/core/attempt-history.ts). */
  outcome: string;
  /** SQL text giving the error, or NULL. Its stack (lines from the first "  at …") is cut off. */
  error: string;
  /** SQL text giving the progress at the end of the attempt. Default: the job's. */
  progress?: string;
  /** SQL text giving the attempt span's traceparent, or NULL. Default NULL. */
  traceparent?: string;
}

/**
 * `history = ${appendAttempt(...)}`: the job's history with one more entry, the oldest dropped past
 * HISTORY_LIMIT. Below the limit (most jobs) it is a plain append; at the limit, the first entry
 * goes; only a history longer than the limit (after the limit was lowered) is rebuilt.
 */
export function appendAttempt(entry: AttemptEntrySql): string {
  const e = attemptEntry(entry);
  return `CASE WHEN jsonb_array_length(j.history) < ${HISTORY_LIMIT} THEN j.history || jsonb_build_array(${e})
         WHEN jsonb_array_length(j.history) = ${HISTORY_LIMIT} THEN (j.history - 0) || jsonb_build_array(${e})
         ELSE (SELECT coalesce(jsonb_agg(h.e ORDER BY h.n), '[]'::jsonb)
                 FROM jsonb_array_elements(j.history || jsonb_build_array(${e})) WITH ORDINALITY AS h(e, n)
                WHERE h.n > jsonb_array_length(j.history) + 1 - ${HISTORY_LIMIT}) END`;
}

function attemptEntry(p: AttemptEntrySql): string {
  return `jsonb_build_object(
      'attempt', j.attempts,
      'startedAt', j.started_at,
      'endedAt', ${NOW},
      'durationMs', round(extract(epoch FROM ${NOW} - j.started_at) * 1000)::bigint,
      'outcome', ${p.outcome},
      'error', left(regexp_replace(${p.error}, '\\n\\s*at\\s.*$', ''), ${HISTORY_ERROR_CHARS}),
      'worker', j.locked_by,
      'progress', ${p.progress ?? 'j.progress'},
      'traceparent', ${p.traceparent ?? 'NULL'})`;
}
