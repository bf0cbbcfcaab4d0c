-- Events (issue 24): a workflow that waits for the outside world, and tasks an event starts.
--
-- skiplock.sendEvent stores an event and, in the same transaction, completes every wait for it
-- (ctx.waitForEvent), enqueues the jobs of the tasks defined with `on:` and cancels the jobs with
-- a matching `cancelOn` (src/store/events.ts). A wait registered after its event arrived finds
-- the stored event instead: no event is lost. Sends and wait registrations of one name and key
-- serialize on a transaction-level advisory lock taken by the first statement of their batch, so
-- each sees what the other committed (see eventLock in src/store/events.ts for why it cannot be
-- taken inside the same statement).
--
-- ADD COLUMN with a constant default or none rewrites nothing (PostgreSQL >= 11).

CREATE TABLE skiplock.event (
  id              bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  name            text        NOT NULL CHECK (name ~ '^[A-Za-z0-9_.:/-]{1,200}$'),
  -- A wait with a key matches only events of that key; a wait without one, every event of the name.
  key             text        CHECK (length(key) BETWEEN 1 AND 255),
  data            jsonb,
  -- A send again with the same key answers the first send's result and writes nothing.
  idempotency_key text        CHECK (length(idempotency_key) BETWEEN 1 AND 255),
  created_at      timestamptz NOT NULL,
  -- What the send did, kept for the replay's answer and the dashboard.
  woken           integer     NOT NULL DEFAULT 0,
  started         integer     NOT NULL DEFAULT 0,
  cancelled       integer     NOT NULL DEFAULT 0,
  -- The `on:` tasks whose schema refused the event's data: [{task, message}].
  refused         jsonb
);
CREATE UNIQUE INDEX event_idempotency_key_idx ON skiplock.event (idempotency_key) WHERE idempotency_key IS NOT NULL;
-- A wait looking for a stored event: the first of its name (and key) after its job was created.
CREATE INDEX event_name_key_idx ON skiplock.event (name, key, created_at, id);
CREATE INDEX event_name_idx ON skiplock.event (name, created_at, id);
-- Retention.
CREATE INDEX event_created_idx ON skiplock.event (created_at);

-- Event and callback waits are steps too.
ALTER TABLE skiplock.job_step DROP CONSTRAINT job_step_kind_check;
ALTER TABLE skiplock.job_step ADD CONSTRAINT job_step_kind_check
  CHECK (kind IN ('step', 'sleep', 'invoke', 'event', 'callback'));
ALTER TABLE skiplock.job_step
  -- event: the name and key waited for; callback: null.
  ADD COLUMN event_name text,
  ADD COLUMN event_key  text,
  -- event: the event that completed the wait (null while waiting, or after a timeout). A later
  -- wait of the same job for the same name and key skips the events its earlier waits consumed.
  ADD COLUMN event_id   bigint;
-- The send's look-up of the waits its event completes.
CREATE INDEX job_step_event_wait_idx ON skiplock.job_step (event_name, event_key)
  WHERE kind = 'event' AND status = 'waiting';

ALTER TABLE skiplock.job
  -- A wait of this job was completed (by an event or a callback) while the job was RUNNING: the
  -- result write that suspends it (WAITING, or QUEUED until a timeout) queues it due now instead.
  -- Read by that write from the row it updates, so a completion committed at the same moment is
  -- seen (the row lock orders the two), and cleared by it.
  ADD COLUMN wait_woken boolean NOT NULL DEFAULT false,
  -- cancelOn: `name` (any key) or `name key` entries; a matching event cancels the job.
  ADD COLUMN cancel_on text[];
CREATE INDEX job_cancel_on_idx ON skiplock.job USING gin (cancel_on) WHERE cancel_on IS NOT NULL;
