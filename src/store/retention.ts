/**
 * Retention: finished jobs (and events) past their age are deleted, one statement per pass.
 *
 * Time: `$1` is always the clock (src/store/clock.ts).
 */
import { MS, NOW, clock, type Clock } from './clock.ts';
import { statement, type Statement } from './sql.ts';
import { deleteChunksCte } from './streams.ts';

export interface RetentionParams {
  now: Clock;
  /** DONE jobs older than this are deleted. */
  doneMs: number;
  /** CANCELLED jobs older than this are deleted. */
  cancelledMs: number;
  /** DEAD jobs older than this are deleted; null keeps them until a person acts. */
  deadMs: number | null;
  limit: number;
  /** Events (migration 016) stored longer ago than this are deleted too, by the same statement (`limit` of them at most). Absent: none. */
  eventsMs?: number;
}

/**
 * Retention: deletes finished jobs past their age, at most `limit` at a time, in no particular
 * order (the record's finish times have a BRIN index, migration 021, which finds the block ranges
 * holding old rows but keeps no order; an ORDER BY would sort every expired row on each pass). Every
 * tick runs it (at most once a minute per process), so it must cost nothing when there is nothing
 * to delete: the first condition bounds the scan to the ranges holding rows older than the
 * shortest retention, whatever the planner makes of the OR below.
 */
export function pruneFinishedJobs(p: RetentionParams): Statement {
  return statement(
    `WITH doomed AS MATERIALIZED (
       SELECT id FROM skiplock.job_record
        WHERE finished_at < ${NOW} - least($2::bigint, $3::bigint, coalesce($4::bigint, $2::bigint)) ${MS}
          AND (   (status = 'DONE' AND finished_at < ${NOW} - $2 ${MS})
               OR (status = 'CANCELLED' AND finished_at < ${NOW} - $3 ${MS})
               OR (status = 'DEAD' AND $4::bigint IS NOT NULL AND finished_at < ${NOW} - $4 ${MS}))
        LIMIT $5
        FOR UPDATE SKIP LOCKED
     ),
     deleted AS (DELETE FROM skiplock.job_record j USING doomed WHERE j.id = doomed.id RETURNING j.id),
     -- Their streams' chunks go with them (migrations/019_streams.sql: no foreign key).
     ${deleteChunksCte('deleted')}${p.eventsMs === undefined ? '' : `,
     -- Events past their retention (event_created_idx): the retention pass stays one statement.
     old_events AS MATERIALIZED (SELECT id FROM skiplock.event WHERE created_at < ${NOW} - $6::bigint ${MS} ORDER BY created_at LIMIT $5),
     deleted_events AS (DELETE FROM skiplock.event e USING old_events o WHERE e.id = o.id RETURNING 1)`}
     SELECT count(*)::int AS deleted${p.eventsMs === undefined ? '' : ', (SELECT count(*)::int FROM deleted_events) AS deleted_events'} FROM deleted`,
    [clock(p.now), p.doneMs, p.cancelledMs, p.deadMs, p.limit, ...(p.eventsMs === undefined ? [] : [p.eventsMs])],
  );
}
