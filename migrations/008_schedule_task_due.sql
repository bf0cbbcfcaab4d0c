-- When a deployment's next schedule instant comes: what a self-scheduling ticker (the Cloudflare
-- Durable Object alarm) asks before it sleeps, about the dynamic schedules of its tasks
-- (src/store/wakeup.ts). In schedule_due_idx (next_run_at order) the first of them can lie behind
-- every other service's schedules in a shared database (35 ms past 100,000 of them); here it is
-- one probe per task. Not partial on `enabled`, so that the query can keep schedule_due_idx out.
CREATE INDEX schedule_task_due_idx ON skiplock.schedule (task, next_run_at) WHERE source = 'dynamic';
