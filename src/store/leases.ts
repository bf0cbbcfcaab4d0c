/**
 * The leases of RUNNING jobs: the heartbeat that extends them, the give-back of jobs a lost
 * answer claimed, and the reaper that takes back the jobs whose lease expired. Each is one
 * statement, so all of them work over Neon's HTTP driver.
 *
 * Time: `$1` is always the clock (src/store/clock.ts).
 */
import { NOW, clock, leaseUntil, type Clock } from './clock.ts';
import { appendAttempt } from './history.ts';
import { preparedStatement, statement, type Statement } from './sql.ts';
import { fanInCtes } from './steps.ts';
import { settleCtes } from './queue.ts';

/**
 * After a claiming statement failed (it may have committed with its answer lost): gives back the
 * jobs this worker holds but never saw, as a release does (QUEUED, due now, the attempt given
 * back; CANCELLED if a cancel was asked). Left alone they would wait for the reaper, which spends
 * the attempt of a job that never ran. `known` are the jobs the tick holds and knows of (running,
 * or with a result still to write). The worker's jobs are those whose locked_by is `workerId`
 * or `workerId#<claim number>`. Not a parent whose child is given back here too: a cancelled
 * child's fan-in updates its parent, and a statement updates a row once; the next give-back or the
 * reaper takes it.
 */
export function releaseUnseenClaims(p: { now: Clock; workerId: string; known: readonly string[] }): Statement {
  return statement(
    `WITH outcome AS MATERIALIZED (
       SELECT j.*, CASE WHEN j.cancel_requested THEN 'CANCELLED' ELSE 'QUEUED' END AS next_status,
              ${appendAttempt({
                outcome: `CASE WHEN j.cancel_requested THEN 'cancelled' ELSE 'released' END`,
                error: `'claimed by a statement whose answer was lost: given back before it ran'`,
              })} AS next_history
         FROM skiplock.queue j
        WHERE j.status = 'RUNNING' AND (j.locked_by = $2 OR starts_with(j.locked_by, $2 || '#')) AND NOT (j.id = ANY ($3::bigint[]))
          AND NOT EXISTS (SELECT 1 FROM skiplock.queue c WHERE c.parent_id = j.id AND c.status = 'RUNNING'
                             AND (c.locked_by = $2 OR starts_with(c.locked_by, $2 || '#')) AND NOT (c.id = ANY ($3::bigint[])))
        FOR UPDATE OF j
     ),
     ${settleCtes({
       outcome: 'outcome', status: 'next_status',
       keep: { attempts: 'o.attempts - 1', run_at: NOW, history: 'o.next_history' },
       end: { history: 'e.next_history' },
       returning: 'r.parent_step, r.id',
     })},
     released AS (
       SELECT o.id, o.next_status AS status, NULL::jsonb AS result, o.last_error, o.parent_id, r.parent_step
         FROM outcome o LEFT JOIN recorded r ON r.id = o.id
     ),
     -- A child cancelled here reaches its parent (src/store/steps.ts).
     ${fanInCtes('released')}
     SELECT id::text AS id FROM released`,
    [clock(p.now), p.workerId, p.known],
  );
}

/**
 * Extends the leases of jobs this worker still holds. Returns the ones it holds (id and
 * locked_by: which claim of the job), with their cancel flag; a job missing from the answer was
 * reaped or reclaimed, so its handler must stop.
 */
export function extendLeases(p: {
  now: Clock;
  workerId: string;
  /** Each with the locked_by its claim wrote (default `workerId`), and `progress`: what the handler reported since the last write (ctx.progress), carried by the heartbeat. */
  jobs: readonly { id: string; attempt: number; locked_by?: string; progress?: { value: unknown } | undefined }[];
  leaseMs: number;
  leaseGraceMs: number;
}): Statement {
  return preparedStatement(
    `WITH held AS MATERIALIZED (SELECT * FROM jsonb_to_recordset($3::jsonb) AS r(id bigint, attempt int, locked_by text, progress jsonb))
     UPDATE skiplock.queue j SET
       locked_until = greatest(j.locked_until, ${leaseUntil('$5', '$4')}),
       updated_at = ${NOW},
       progress = coalesce(r.progress -> 'value', j.progress)
     FROM held r
     -- By primary key, as completeAndClaim finds its rows: never a join the planner may turn into a scan.
     WHERE j.id = ANY (ARRAY(SELECT id FROM held)) AND j.id = r.id
       AND j.status = 'RUNNING' AND j.locked_by = coalesce(r.locked_by, $2) AND j.attempts = r.attempt
     RETURNING j.id::text AS id, j.locked_by, j.cancel_requested`,
    [clock(p.now), p.workerId, JSON.stringify(p.jobs), p.leaseMs, p.leaseGraceMs],
  );
}

/**
 * The reaper: RUNNING jobs whose lease expired go back to QUEUED, due now; to DEAD when their
 * attempts are exhausted; to CANCELLED when a cancel was requested. Durable jobs are reaped like
 * any other: their completed steps are stored, so the next run skips them. Not a parent whose
 * child is reaped in the same statement: the child's fan-in updates the parent's row, and a
 * statement updates a row once (the count-down would be lost); the next reap takes it.
 */
export function reapExpiredLeases(p: { now: Clock; limit: number }): Statement {
  return statement(
    `WITH locked AS MATERIALIZED (
       SELECT id, parent_id FROM skiplock.queue
        WHERE status = 'RUNNING' AND locked_until < ${NOW}
        ORDER BY locked_until
        LIMIT $2
        FOR UPDATE SKIP LOCKED
     ),
     outcome AS MATERIALIZED (
       SELECT j.*,
              CASE WHEN j.cancel_requested THEN 'CANCELLED' WHEN j.attempts >= j.max_attempts THEN 'DEAD' ELSE 'QUEUED' END AS next_status,
              'lease expired on attempt ' || j.attempts || ' (worker ' || j.locked_by || ' stopped responding)' AS next_error,
              ${appendAttempt({
                outcome: `'lease-lost'`,
                error: `'lease expired on attempt ' || j.attempts || ' (worker ' || j.locked_by || ' stopped responding)'`,
              })} AS next_history
         FROM skiplock.queue j JOIN locked l ON l.id = j.id
        WHERE NOT EXISTS (SELECT 1 FROM locked c WHERE c.parent_id = l.id)
        -- Locked already: this reads each row's latest version (a cancel asked since the snapshot).
        FOR UPDATE OF j
     ),
     ${settleCtes({
       outcome: 'outcome', status: 'next_status',
       keep: { run_at: NOW, last_error: 'o.next_error', history: 'o.next_history' },
       end: { last_error: 'e.next_error', history: 'e.next_history' },
       returning: 'r.parent_step, r.id',
     })},
     reaped AS (
       SELECT o.id, o.next_status AS status, NULL::jsonb AS result, o.next_error AS last_error, o.parent_id, r.parent_step
         FROM outcome o LEFT JOIN recorded r ON r.id = o.id
     ),
     -- A child that ends DEAD or CANCELLED here reaches its parent (src/store/steps.ts). The reaper
     -- never sees WAITING jobs: they hold no lease.
     ${fanInCtes('reaped')}
     SELECT count(*)::int AS reaped, count(*) FILTER (WHERE status = 'DEAD')::int AS dead FROM reaped`,
    [clock(p.now), p.limit],
  );
}
