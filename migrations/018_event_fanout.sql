-- `on:` whoever sends the event (issue 30 item 3), and pausing only known tasks (item 11).
--
-- A send starts the `on:` jobs of the tasks its own instance defines (their payload schemas and
-- flow-control keys run in JS: the job of a task is made by a process that has the task). For an
-- event sent by a process without them (another service, the CLI without --tasks), the
-- deployment that defines them must start them: it registers its tasks here, and a send leaves a
-- pending row per subscribed task it could not start itself, which that deployment's ticks
-- dispatch (src/store/events.ts).

-- The tasks deployments run, each with the event names its `on:` subscribes to ('{}': none).
-- Written once per instance, by its first tick's claim (and by skiplock.migrate): a row per task,
-- replaced when a deployment registers another list for it. A few rows per deployment; also what
-- pauseTask checks a name against.
CREATE TABLE skiplock.registered_task (
  task          text        PRIMARY KEY CHECK (length(task) BETWEEN 1 AND 200),
  events        text[]      NOT NULL DEFAULT '{}',
  registered_at timestamptz NOT NULL DEFAULT now()
);

-- The `on:` tasks of an event that its sender did not start itself: one row per event and task,
-- deleted by the tick that starts (or refuses) the job — the delete is what makes it once, with
-- the job's idempotency key `skiplock:event:<id>:<task>` as before. Only pending work is here,
-- so a deployment's look-up (by task and event name) reads its own rows and nobody else's.
-- Deleted with its event (retention).
CREATE TABLE skiplock.event_pending (
  event_id   bigint NOT NULL REFERENCES skiplock.event (id) ON DELETE CASCADE,
  task       text   NOT NULL,
  event_name text   NOT NULL,
  PRIMARY KEY (event_id, task)
);
CREATE INDEX event_pending_task_idx ON skiplock.event_pending (task, event_name, event_id);

-- What the send left to other deployments (rows of event_pending still there), beside started.
ALTER TABLE skiplock.event ADD COLUMN pending integer NOT NULL DEFAULT 0;
