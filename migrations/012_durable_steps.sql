-- Durable steps (issue 15): a job as a sequence of steps that outlives any number of invocations.
--
-- ctx.step(id, fn) stores each completed step's JSON output in skiplock.job_step (one fenced
-- statement per step); a run after a retry, a deadline or a crash returns the stored outputs
-- instead of running them again. ctx.sleep puts the job back in the queue until it wakes.
-- ctx.invoke enqueues child jobs (parent_id, parent_step) and the parent WAITs: the statement
-- that ends the last child wakes it (pending_children reaches 0), and writes the child's result
-- into the parent's step row, in the same statement.
--
-- ADD COLUMN with a constant default or none rewrites nothing (PostgreSQL >= 11).

-- WAITING: a parent suspended until its children end. It holds no lease (job_lease_iff_running)
-- and is not finished (job_finished_iff_terminal); neither the claim nor the reaper sees it.
ALTER TABLE skiplock.job DROP CONSTRAINT job_status_check;
ALTER TABLE skiplock.job ADD CONSTRAINT job_status_check
  CHECK (status IN ('QUEUED', 'RUNNING', 'WAITING', 'DONE', 'DEAD', 'CANCELLED'));

ALTER TABLE skiplock.job
  -- The job whose ctx.invoke enqueued this one, and that invoke's step id. No foreign key:
  -- retention deletes a finished child or parent on its own schedule.
  ADD COLUMN parent_id bigint,
  ADD COLUMN parent_step text,
  -- Children invoked and not yet ended. Every statement that ends a child decrements it (the
  -- parent's row lock orders concurrent ends: exactly one of them sees it reach 0).
  ADD COLUMN pending_children integer NOT NULL DEFAULT 0,
  -- How many step rows the job has: 0 for a job without steps, whose claim reads no step rows.
  ADD COLUMN step_count integer NOT NULL DEFAULT 0;

ALTER TABLE skiplock.job ADD CONSTRAINT job_pending_children_in_range CHECK (pending_children >= 0) NOT VALID;
ALTER TABLE skiplock.job ADD CONSTRAINT job_parent_pair CHECK ((parent_id IS NULL) = (parent_step IS NULL)) NOT VALID;

-- A parent's children (cancel cascades, the job page's links).
CREATE INDEX job_parent_idx ON skiplock.job (parent_id) WHERE parent_id IS NOT NULL;

CREATE TABLE skiplock.job_step (
  job_id      bigint      NOT NULL REFERENCES skiplock.job (id) ON DELETE CASCADE,
  -- The id the handler gave (ctx.step('charge', ...)): unique per job.
  id          text        NOT NULL CHECK (length(id) BETWEEN 1 AND 200),
  -- The order the handler reached its steps in; a run that reaches them in another order fails.
  seq         integer     NOT NULL CHECK (seq >= 0),
  kind        text        NOT NULL CHECK (kind IN ('step', 'sleep', 'invoke')),
  -- step: done | failed (its last run threw); sleep: sleeping | done; invoke: waiting | done | failed.
  status      text        NOT NULL CHECK (status IN ('done', 'failed', 'sleeping', 'waiting')),
  -- A step's output (its fn's JSON result), or an invoked child's result.
  output      jsonb,
  -- Why the step's last run threw, or why the child ended DEAD or CANCELLED.
  error       text,
  -- Runs of the step's fn (a step retried with its job counts each run).
  attempts    integer     NOT NULL DEFAULT 0 CHECK (attempts >= 0),
  started_at  timestamptz,
  finished_at timestamptz,
  duration_ms integer,
  -- sleep: when the job wakes.
  wake_at     timestamptz,
  -- invoke: the child job, and its task.
  child_id    bigint,
  child_task  text,
  -- invoke: how the child ended (DONE, DEAD, CANCELLED) once it has; ChildJobError carries it.
  child_status text CHECK (child_status IN ('DONE', 'DEAD', 'CANCELLED')),
  PRIMARY KEY (job_id, id),
  UNIQUE (job_id, seq),
  CONSTRAINT job_step_sleep_has_wake CHECK (kind <> 'sleep' OR wake_at IS NOT NULL),
  CONSTRAINT job_step_invoke_has_child CHECK (kind <> 'invoke' OR (child_id IS NOT NULL AND child_task IS NOT NULL))
);
