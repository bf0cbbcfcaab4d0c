-- Versioning workflows (issue 25): ctx.patched(id) records a marker step (kind 'patch', id
-- 'patched:<id>', status 'done') where a run first takes a patched path, so that later runs of
-- the same job take it too, while runs that went past that point before the patch existed keep
-- the old path (docs/steps.md, "Changing a workflow's code").
--
-- The list also names the kinds of migration 016 (events: 'event', 'callback'), written beside
-- this one: whichever of the two a database applies last, both sets stay allowed.
--
-- NOT VALID: every existing row already passes (the old list is a subset), so the table is not
-- scanned under the ACCESS EXCLUSIVE lock; new and updated rows are checked.
ALTER TABLE skiplock.job_step DROP CONSTRAINT job_step_kind_check;
ALTER TABLE skiplock.job_step ADD CONSTRAINT job_step_kind_check
  CHECK (kind IN ('step', 'sleep', 'invoke', 'event', 'callback', 'patch')) NOT VALID;
