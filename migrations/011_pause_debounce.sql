-- Flow control (issue 14): pausing a task, and debounced enqueues.

-- Paused tasks, by name. The claim and the wake-up read it (a few rows at most): a paused task's
-- jobs are neither claimed nor keep a self-scheduling ticker awake. Schedules still fire into the
-- queue; running jobs finish.
CREATE TABLE skiplock.paused_task (
  name      text        PRIMARY KEY CHECK (length(name) BETWEEN 1 AND 200),
  paused_at timestamptz NOT NULL DEFAULT now()
);

-- Debounce: while a job with a key is QUEUED and not yet claimed, enqueues with the same task and
-- key update it (INSERT ... ON CONFLICT on this index: one statement, race-free). The claim clears
-- the key, so a job that ran (and may come back to QUEUED for a retry) never collides with the
-- next debounced job; a person's retry clears it too.
ALTER TABLE skiplock.job ADD COLUMN debounce_key text CHECK (length(debounce_key) BETWEEN 1 AND 255);
CREATE UNIQUE INDEX job_debounce_idx ON skiplock.job (task, debounce_key)
  WHERE status = 'QUEUED' AND debounce_key IS NOT NULL;
