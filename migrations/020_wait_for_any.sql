-- ctx.waitForAny (issue 35 item 3): one step that waits for the first of several (event, key)
-- alternatives. It is one job_step row of kind 'any-event', its alternatives in
-- event_alternatives as the tokens cancelOn already uses (job.cancel_on): `name` for an
-- alternative without a key (every key of the name), `name key` with one (names have no space,
-- so the first space splits them). A send matches a wait when the wait's tokens overlap its own,
-- [name] or [name, 'name key'] (src/store/events.ts cancelTokens): the array operator `&&`, which
-- the GIN index below answers. One row per wait, rather than a row per alternative, because the
-- first event ends the whole wait: the send's single-row update (status 'waiting' → 'done',
-- re-checked under the row lock) is what lets exactly one of two events sent at once win, with
-- no sibling rows to close.
--
-- The kind list keeps every kind of migrations 016 and 017. NOT VALID: existing rows all pass
-- (the old list is a subset), so the table is not scanned under the ACCESS EXCLUSIVE lock.
-- ADD COLUMN without a default rewrites nothing.

ALTER TABLE skiplock.job_step DROP CONSTRAINT job_step_kind_check;
ALTER TABLE skiplock.job_step ADD CONSTRAINT job_step_kind_check
  CHECK (kind IN ('step', 'sleep', 'invoke', 'event', 'callback', 'patch', 'any-event')) NOT VALID;

ALTER TABLE skiplock.job_step
  -- any-event: the alternatives waited for, in the order the handler listed them.
  ADD COLUMN event_alternatives text[];

-- The send's look-up of the any-waits its event completes: only waiting ones are indexed.
-- fastupdate off: every send probes it, and a GIN pending list (entries not yet merged, until a
-- vacuum) would be read in full by each probe; a wait's insert updates the index at once instead.
CREATE INDEX job_step_any_wait_idx ON skiplock.job_step USING gin (event_alternatives) WITH (fastupdate = off)
  WHERE kind = 'any-event' AND status = 'waiting';
