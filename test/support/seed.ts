/**
 * Benches and load tests insert many jobs by hand, in one statement, without the enqueue's
 * per-job work: `seeded(insert)` turns an `INSERT INTO skiplock.job_record (…) SELECT …` into a
 * statement that also gives each live row it inserts its queue row (migration 021), and answers
 * how many it inserted (`n`; or `answer`, SQL over the inserted rows `r`). A WAITING row gets no wake instant (a parent waiting for children).
 */
export function seeded(recordInsert: string, answer = 'count(*)::int AS n'): string {
  return `WITH r AS (${recordInsert} RETURNING *),
     q AS (
       INSERT INTO skiplock.queue (id, task, status, priority, run_at, attempts, max_attempts, timeout_ms, locked_by, locked_until,
                                   last_error, created_at, updated_at, started_at, history, flow_key, rate_key, parent_id,
                                   pending_children, step_count, cancel_on, schedule_name)
       SELECT id, task, status, priority, CASE WHEN status = 'WAITING' THEN NULL ELSE run_at END, attempts, max_attempts, timeout_ms, locked_by, locked_until,
              last_error, created_at, updated_at, started_at, history, flow_key, rate_key, parent_id,
              pending_children, step_count, cancel_on, schedule_name
         FROM r WHERE status IN ('QUEUED', 'RUNNING', 'WAITING')
     )
     SELECT ${answer} FROM r`;
}
