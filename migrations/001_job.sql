-- The job table: the queue and the source of truth.
-- Every state change is one statement (src/store/jobs.ts); the CHECKs below make the
-- database refuse a row that breaks the state machine, whoever writes it.

CREATE TABLE skiplock.job (
  id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  task             text        NOT NULL CHECK (length(task) BETWEEN 1 AND 200),
  payload          jsonb       NOT NULL DEFAULT '{}'::jsonb,
  status           text        NOT NULL DEFAULT 'QUEUED'
                               CHECK (status IN ('QUEUED', 'RUNNING', 'DONE', 'DEAD', 'CANCELLED')),
  priority         smallint    NOT NULL DEFAULT 0,
  run_at           timestamptz NOT NULL DEFAULT now(),
  attempts         integer     NOT NULL DEFAULT 0,
  max_attempts     integer     NOT NULL DEFAULT 5 CHECK (max_attempts BETWEEN 1 AND 1000),
  timeout_ms       integer     NOT NULL DEFAULT 10000 CHECK (timeout_ms > 0),
  locked_by        text,
  locked_until     timestamptz,
  cancel_requested boolean     NOT NULL DEFAULT false,
  last_error       text,
  result           jsonb,
  idempotency_key  text UNIQUE CHECK (length(idempotency_key) BETWEEN 1 AND 255),
  schedule_name    text,
  scheduled_for    timestamptz,
  created_at       timestamptz NOT NULL DEFAULT now(),
  updated_at       timestamptz NOT NULL DEFAULT now(),
  finished_at      timestamptz,

  CONSTRAINT job_attempts_in_range CHECK (attempts BETWEEN 0 AND max_attempts),
  -- A lease exists exactly while the job runs.
  CONSTRAINT job_lease_iff_running CHECK (
    (status = 'RUNNING') = (locked_by IS NOT NULL AND locked_until IS NOT NULL)
    AND (status = 'RUNNING' OR (locked_by IS NULL AND locked_until IS NULL))
  ),
  -- A running job has been claimed at least once.
  CONSTRAINT job_running_has_attempt CHECK (status <> 'RUNNING' OR attempts >= 1),
  -- finished_at is set exactly for the terminal states.
  CONSTRAINT job_finished_iff_terminal CHECK (
    (status IN ('DONE', 'DEAD', 'CANCELLED')) = (finished_at IS NOT NULL)
  ),
  CONSTRAINT job_result_only_when_done CHECK (result IS NULL OR status = 'DONE'),
  CONSTRAINT job_schedule_pair CHECK ((schedule_name IS NULL) = (scheduled_for IS NULL))
);

-- Claiming: the next due QUEUED jobs by priority, then run_at.
CREATE INDEX job_claim_idx ON skiplock.job (priority DESC, run_at, id) WHERE status = 'QUEUED';
-- Reaping: RUNNING jobs by lease expiry.
CREATE INDEX job_reap_idx ON skiplock.job (locked_until) WHERE status = 'RUNNING';
-- Retention: finished jobs by age.
CREATE INDEX job_finished_idx ON skiplock.job (finished_at) WHERE finished_at IS NOT NULL;
-- Listing and filtering (newest first, keyset pagination on id).
CREATE INDEX job_status_id_idx ON skiplock.job (status, id DESC);
CREATE INDEX job_task_id_idx ON skiplock.job (task, id DESC);
-- Overlap checks for schedules: the live job of a schedule.
CREATE INDEX job_schedule_live_idx ON skiplock.job (schedule_name)
  WHERE schedule_name IS NOT NULL AND status IN ('QUEUED', 'RUNNING');
