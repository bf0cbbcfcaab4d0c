-- Issue 33: the record's DONE end as a HOT update (docs/benchmarks.md, "Issue 33: the data model").
--
-- The end of a job (one UPDATE of its record) writes no index entry when it is HOT: when no column
-- that a btree index of skiplock.job_record names changes, and the new version fits on the record's
-- page. Two things stopped it. job_failed_finished_idx (migration 021: failed_status, finished_at)
-- names finished_at, which every end sets, so no end was HOT, whatever the page held. And a batch's
-- records are inserted together, so at fillfactor 80 a page had room for the new versions of about
-- a quarter of them.
--
-- The failed records' finish order (retention's next expiry, src/store/wakeup.ts) is read from
-- failed_at instead: the finish instant of a DEAD or CANCELLED record, null for every other one. An
-- end that fails a job sets it with failed_status; a DONE end leaves both null; a retry or a
-- revival clears both. Adding the column rewrites nothing; the copy writes the failed records only.
ALTER TABLE skiplock.job_record ADD COLUMN failed_at timestamptz;
UPDATE skiplock.job_record SET failed_at = finished_at WHERE failed_status IS NOT NULL;
CREATE INDEX job_failed_at_idx ON skiplock.job_record (failed_status, failed_at) WHERE failed_status IS NOT NULL;
DROP INDEX skiplock.job_failed_finished_idx;
-- Room on each page for the end's new version of the records inserted there (pages already written
-- keep their layout; new ones follow).
ALTER TABLE skiplock.job_record SET (fillfactor = 50);
-- The view reads as the record does (statements answer a record's r.* beside the view's rows).
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
       r.batch_key,
       r.failed_at
  FROM skiplock.job_record r LEFT JOIN skiplock.queue q ON q.id = r.id;
-- Every write keeps the two together (the records already failed were just given theirs).
ALTER TABLE skiplock.job_record ADD CONSTRAINT job_record_failed_at CHECK ((failed_at IS NULL) = (failed_status IS NULL)) NOT VALID;
