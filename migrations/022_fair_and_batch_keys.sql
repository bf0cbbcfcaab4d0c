-- Issue 35: the keys of fair share and of batches (docs/flow-control.md).
--
-- fair_key: the job's fairness key (a task's `fairness.key`, or `fairnessKey` on enqueue); null for
-- a job without one. batch_key: for a job of a task with `batch`, the key its batches are made of
-- ('' without `batch.key`); null otherwise. Both are set at enqueue and never change, so the record
-- holds them (and the queue a copy, for its indexes).
--
-- A job with either key is claimed by its own claim (fair share: migration 023; batches: 024), not
-- by the plain one: the plain claim's index leaves such jobs out, so no plain claim walks past a
-- tenant's backlog or a batch still filling up. Jobs without keys (every job until a task asks for
-- either) are claimed and indexed exactly as before.

ALTER TABLE skiplock.job_record ADD COLUMN fair_key text, ADD COLUMN batch_key text;
ALTER TABLE skiplock.queue ADD COLUMN fair_key text, ADD COLUMN batch_key text;

CREATE OR REPLACE VIEW skiplock.job AS
SELECT r.id,
       r.task,
       r.payload,
       CASE WHEN q.id IS NULL THEN r.status ELSE q.status END AS status,
       CASE WHEN q.id IS NULL THEN r.priority ELSE q.priority END AS priority,
       CASE WHEN q.id IS NULL THEN r.run_at ELSE coalesce(q.run_at, r.run_at) END AS run_at,
       CASE WHEN q.id IS NULL THEN r.attempts ELSE q.attempts END AS attempts,
       r.max_attempts,
       r.timeout_ms,
       CASE WHEN q.id IS NULL THEN r.locked_by ELSE q.locked_by END AS locked_by,
       CASE WHEN q.id IS NULL THEN r.locked_until ELSE q.locked_until END AS locked_until,
       CASE WHEN q.id IS NULL THEN r.cancel_requested ELSE q.cancel_requested END AS cancel_requested,
       CASE WHEN q.id IS NULL THEN r.last_error ELSE q.last_error END AS last_error,
       r.result,
       r.idempotency_key,
       r.schedule_name,
       r.scheduled_for,
       r.created_at,
       CASE WHEN q.id IS NULL THEN r.updated_at ELSE q.updated_at END AS updated_at,
       r.finished_at,
       r.schedule_state,
       CASE WHEN q.id IS NULL THEN r.started_at ELSE q.started_at END AS started_at,
       CASE WHEN q.id IS NULL THEN r.history ELSE q.history END AS history,
       CASE WHEN q.id IS NULL THEN r.progress ELSE q.progress END AS progress,
       r.traceparent,
       CASE WHEN q.id IS NULL THEN r.flow_key ELSE q.flow_key END AS flow_key,
       CASE WHEN q.id IS NULL THEN r.rate_key ELSE q.rate_key END AS rate_key,
       CASE WHEN q.id IS NULL THEN r.debounce_key ELSE q.debounce_key END AS debounce_key,
       r.parent_id,
       r.parent_step,
       CASE WHEN q.id IS NULL THEN r.pending_children ELSE q.pending_children END AS pending_children,
       CASE WHEN q.id IS NULL THEN r.step_count ELSE q.step_count END AS step_count,
       r.finished_by,
       r.finished_traceparent,
       CASE WHEN q.id IS NULL THEN r.rate_attempt ELSE q.rate_attempt END AS rate_attempt,
       CASE WHEN q.id IS NULL THEN r.wait_woken ELSE q.wait_woken END AS wait_woken,
       r.cancel_on,
       r.failed_status,
       r.fair_key,
       r.batch_key
  FROM skiplock.job_record r LEFT JOIN skiplock.queue q ON q.id = r.id;

DROP INDEX skiplock.job_claim_idx;
CREATE INDEX job_claim_idx ON skiplock.queue (priority DESC, run_at, id, timeout_ms, task)
  WHERE status <> 'RUNNING' AND run_at IS NOT NULL AND fair_key IS NULL AND batch_key IS NULL;

-- The plain claim (migrations 003, 005, 021) and when its next job is due, without the keyed jobs.
CREATE OR REPLACE FUNCTION skiplock.claimable_jobs(lim int, at timestamptz, budget_ms int, task_names text[]) RETURNS SETOF bigint
  LANGUAGE sql VOLATILE ROWS 100
  SET enable_sort = off
  SET enable_bitmapscan = off
AS $$
  SELECT id FROM skiplock.queue
   WHERE status <> 'RUNNING' AND run_at IS NOT NULL AND fair_key IS NULL AND batch_key IS NULL AND run_at <= at AND timeout_ms <= budget_ms AND attempts < max_attempts
     AND task = ANY(task_names)
   ORDER BY priority DESC, run_at, id
   LIMIT lim
   FOR UPDATE SKIP LOCKED
$$;

CREATE OR REPLACE FUNCTION skiplock.next_claimable_at(task_names text[], budget_ms int) RETURNS timestamptz
  LANGUAGE sql STABLE
  SET enable_sort = off
  SET enable_bitmapscan = off
AS $$
  WITH RECURSIVE priorities(priority) AS (
    SELECT max(priority) FROM skiplock.queue WHERE status <> 'RUNNING' AND run_at IS NOT NULL AND fair_key IS NULL AND batch_key IS NULL
    UNION ALL
    SELECT (SELECT max(j.priority) FROM skiplock.queue j WHERE j.status <> 'RUNNING' AND j.run_at IS NOT NULL AND j.fair_key IS NULL AND j.batch_key IS NULL AND j.priority < p.priority)
      FROM priorities p WHERE p.priority IS NOT NULL
  )
  SELECT min((SELECT j.run_at FROM skiplock.queue j
               WHERE j.status <> 'RUNNING' AND j.run_at IS NOT NULL AND j.fair_key IS NULL AND j.batch_key IS NULL AND j.priority = p.priority
                 AND j.task = ANY(task_names) AND j.attempts < j.max_attempts AND j.timeout_ms <= budget_ms
               ORDER BY j.run_at
               LIMIT 1))
    FROM priorities p WHERE p.priority IS NOT NULL
$$;

