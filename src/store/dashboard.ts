/**
 * Statements the dashboard reads. Same rules as claim.ts: pure builders, one statement each, and
 * `$1` is the clock.
 */
import { NOW, clock, type Clock } from './clock.ts';
import { statement, type Statement } from './sql.ts';

/**
 * What finished or failed in each of the last `minutes` minutes, oldest first, one row per
 * minute (zeros included): `minute`, and the jobs that are now DONE or DEAD by the minute they
 * finished (their records, by job_finished_idx), and `retrying`, the QUEUED jobs waiting for another attempt after a failure (the queue), by
 * the minute that failure was written. Each job counts once, in its current state: the table keeps
 * no history, so a job that failed twice and then succeeded counts as one DONE.
 */
export function jobActivity(p: { now: Clock; minutes: number }): Statement {
  return statement(
    `WITH bounds AS (
       SELECT date_trunc('minute', ${NOW}) - ($2::int - 1) * interval '1 minute' AS first_minute,
              date_trunc('minute', ${NOW}) + interval '1 minute' AS end_at
     ),
     events AS (
       SELECT date_trunc('minute', j.finished_at) AS minute, j.status
         FROM skiplock.job_record j, bounds b
        WHERE j.finished_at >= b.first_minute AND j.finished_at < b.end_at AND j.status IN ('DONE', 'DEAD')
       UNION ALL
       SELECT date_trunc('minute', j.updated_at), 'RETRYING'
         FROM skiplock.queue j, bounds b
        WHERE j.status = 'QUEUED' AND j.attempts > 0 AND j.last_error IS NOT NULL
          AND j.updated_at >= b.first_minute AND j.updated_at < b.end_at
     )
     SELECT m.minute,
            count(e.status) FILTER (WHERE e.status = 'DONE')::int AS done,
            count(e.status) FILTER (WHERE e.status = 'DEAD')::int AS dead,
            count(e.status) FILTER (WHERE e.status = 'RETRYING')::int AS retrying
       FROM bounds b
       CROSS JOIN generate_series(b.first_minute, b.end_at - interval '1 minute', interval '1 minute') AS m(minute)
       LEFT JOIN events e ON e.minute = m.minute
      GROUP BY m.minute
      ORDER BY m.minute`,
    [clock(p.now), p.minutes],
  );
}

/**
 * QUEUED jobs of this deployment's tasks that none of its ticks can claim: their timeout is longer
 * than the longest a tick here can give (AppOptions.maxJobTimeoutMs). The claim index holds every
 * QUEUED job with its task and timeout_ms (migration 006), so the count need not read the rows.
 */
export function countUnclaimableJobs(p: { tasks: readonly string[]; maxTimeoutMs: number }): Statement {
  return statement(
    `SELECT count(*)::int AS n FROM skiplock.queue WHERE status = 'QUEUED' AND timeout_ms > $2 AND task = ANY ($1::text[])`,
    [p.tasks, p.maxTimeoutMs],
  );
}
