-- Schedules and their firings. A schedule is either static (defined in code; the tick upserts
-- its row only when the definition changed) or dynamic (putSchedule at run time). Both keep
-- their watermark here, so what has fired is decided by the database, not by any memory.

CREATE TABLE skiplock.schedule (
  name                 text        PRIMARY KEY CHECK (name ~ '^[A-Za-z0-9_.:-]{1,200}$'),
  source               text        NOT NULL CHECK (source IN ('static', 'dynamic')),
  -- Exactly one timing: a cron expression (5 or 6 fields, in tz), a fixed interval aligned to
  -- the Unix epoch, or times of day (HH:MM[:SS], in tz).
  cron                 text        CHECK (length(cron) BETWEEN 1 AND 200),
  every_ms             bigint      CHECK (every_ms BETWEEN 1000 AND 31622400000),
  daily                text[]      CHECK (cardinality(daily) BETWEEN 1 AND 100),
  tz                   text        NOT NULL DEFAULT 'UTC' CHECK (length(tz) BETWEEN 1 AND 100),
  task                 text        NOT NULL CHECK (length(task) BETWEEN 1 AND 200),
  payload              jsonb       NOT NULL DEFAULT '{}'::jsonb,
  enabled              boolean     NOT NULL DEFAULT true,
  catch_up             text        NOT NULL DEFAULT 'latest' CHECK (catch_up IN ('all', 'latest', 'none')),
  overlap              text        NOT NULL DEFAULT 'allow' CHECK (overlap IN ('allow', 'skip')),
  max_firings_per_tick integer     NOT NULL DEFAULT 100 CHECK (max_firings_per_tick BETWEEN 1 AND 1000),
  -- Bumped whenever the definition changes: a tick that planned with an older one writes nothing.
  revision             integer     NOT NULL DEFAULT 1,
  -- The recurring state each run reads (job.schedule_state) and may replace.
  state                jsonb,
  -- Every instant at or before the watermark is settled (fired, or skipped by policy).
  watermark            timestamptz NOT NULL,
  -- The first instant after the watermark; null until a tick computes it (after a change).
  next_run_at          timestamptz,
  created_at           timestamptz NOT NULL DEFAULT now(),
  updated_at           timestamptz NOT NULL DEFAULT now(),

  CONSTRAINT schedule_one_timing CHECK (num_nonnulls(cron, every_ms, daily) = 1)
);

-- What each tick reads first: the enabled schedules that are due (or need their next run computed).
CREATE INDEX schedule_due_idx ON skiplock.schedule (next_run_at) WHERE enabled;

-- One row per fired instant. The primary key is what makes a firing happen at most once,
-- whatever number of ticks race for it; the job is inserted by the same statement.
CREATE TABLE skiplock.cron_firing (
  schedule_name text        NOT NULL REFERENCES skiplock.schedule (name) ON DELETE CASCADE,
  scheduled_for timestamptz NOT NULL,
  job_id        bigint      REFERENCES skiplock.job (id) ON DELETE SET NULL,
  fired_at      timestamptz NOT NULL,
  PRIMARY KEY (schedule_name, scheduled_for)
);

-- Deleting a job (retention) sets job_id to null here: without this index, a scan per job.
CREATE INDEX cron_firing_job_idx ON skiplock.cron_firing (job_id) WHERE job_id IS NOT NULL;

-- The schedule's state when the job was fired: what the run reads as ctx.state, and what its
-- write is compared with, so that a run that read an outdated state cannot overwrite a newer one.
ALTER TABLE skiplock.job ADD COLUMN schedule_state jsonb;
ALTER TABLE skiplock.job ADD CONSTRAINT job_schedule_state_needs_schedule
  CHECK (schedule_state IS NULL OR schedule_name IS NOT NULL);
