-- Observability: each attempt's outcome kept with the job, the handler's progress, and the trace
-- context of the enqueue. All are written by the statements that already change the job (the
-- claim, the result write, the heartbeat, the reaper, the release): no extra round trip.
--
-- ADD COLUMN with a constant default or none rewrites nothing (PostgreSQL ≥ 11), so this is quick
-- on a large table; the CHECKs are NOT VALID for the same reason (every existing row has the
-- default, and new rows are checked).

ALTER TABLE skiplock.job
  -- When the current (or last) attempt was claimed, on the database clock.
  ADD COLUMN started_at timestamptz,
  -- The last attempts, oldest first (src/store/history.ts bounds it): [{attempt, startedAt,
  -- endedAt, durationMs, outcome, error, worker, progress, traceparent}].
  ADD COLUMN history jsonb NOT NULL DEFAULT '[]'::jsonb,
  -- What the handler last reported with ctx.progress (small JSON), reset when an attempt starts.
  ADD COLUMN progress jsonb,
  -- The W3C traceparent of the enqueuer's context: each attempt's span descends from it.
  ADD COLUMN traceparent text;

ALTER TABLE skiplock.job ADD CONSTRAINT job_history_is_array CHECK (jsonb_typeof(history) = 'array') NOT VALID;
ALTER TABLE skiplock.job ADD CONSTRAINT job_traceparent_format
  CHECK (traceparent ~ '^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$') NOT VALID;
