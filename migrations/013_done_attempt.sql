-- Performance (issue 17, and issue 14's "plain path within 5%"): a job's DONE attempt is no
-- longer appended to its history as a JSON entry by the result write. Building that entry
-- (jsonb_build_object with nine keys) was 15–18% of the plain claim statement's server time,
-- once per job. A DONE job is final (nothing moves a job out of DONE), so its last attempt is
-- fully described by the row itself: attempts, started_at, finished_at, progress, and these two
-- columns, which keep what the row would otherwise lose when the lease is cleared. The history
-- read through the library, the HTTP API and the dashboard is unchanged (src/core/attempt-history.ts
-- adds the DONE attempt from these columns). Every other outcome (retry, dead, released,
-- lease-lost, cancelled) is still written as an entry by the statement that writes it.
ALTER TABLE skiplock.job
  -- The worker (locked_by) that ran the DONE attempt; null for any other status, and for jobs
  -- finished before this migration (their DONE entry is in history).
  ADD COLUMN finished_by text,
  -- The DONE attempt's span traceparent (null without tracing).
  ADD COLUMN finished_traceparent text;
