-- A static schedule removed from the code and added back later: when a deployment that has the
-- schedule's task ticks without its definition, the time is noted here (src/store/schedules.ts,
-- readDueSchedules). Back after longer than a grace, it starts from now, as a re-enabled schedule
-- does, instead of catching up every instant since its old watermark.
ALTER TABLE skiplock.schedule ADD COLUMN missing_since timestamptz;
ALTER TABLE skiplock.schedule ADD CONSTRAINT schedule_missing_only_static CHECK (missing_since IS NULL OR source = 'static');

-- What each tick's sync reads to find the static schedules it lacks: few rows, whatever the
-- number of dynamic schedules (one per tenant makes many).
CREATE INDEX schedule_static_present_idx ON skiplock.schedule (name) WHERE source = 'static' AND missing_since IS NULL;
