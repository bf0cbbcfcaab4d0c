-- Issue 35: fair share (docs/flow-control.md, "Fair share").
--
-- Within a priority level, the due jobs are claimed lane by lane: each fairness key is a lane, and
-- the jobs without a key are one more lane. A claim takes one job from each lane in turn, starting
-- after the lane the last claim of the level stopped at (skiplock.fair_cursor), so a key with a
-- huge backlog delays another key's job by a bounded number of claims: a job at the head of its
-- lane is claimed within ceil(L / n) + 1 claims of n jobs of its level, L the lanes with due jobs.
-- When every lane has had its turn and the claim has room left, the lanes that gave a job share
-- what is left equally (a deficit round robin with a quantum of one job), and the rest of it goes
-- one each from the cursor on, which then moves: no lane is favoured from one claim to the next.
-- Levels are taken from the highest down, as the plain claim takes them.
--
-- Only when a fair job is due (completeAndClaim asks first, by one probe of job_fair_due_idx); a
-- queue without fair jobs is claimed by the plain claim, unchanged. A task with concurrency or rate
-- limits is claimed by claim_limited_jobs (migration 015), which takes turns over its own keys: its
-- jobs stay out of these indexes.

-- The lanes: one entry per fair job that may be claimed, a key's jobs in the order they are due.
CREATE INDEX job_fair_idx ON skiplock.queue (priority DESC, fair_key, run_at, id)
  WHERE status <> 'RUNNING' AND run_at IS NOT NULL AND fair_key IS NOT NULL AND batch_key IS NULL AND flow_key IS NULL;
-- Whether, and from when, a level has a fair job due: its first entry.
CREATE INDEX job_fair_due_idx ON skiplock.queue (priority DESC, run_at)
  WHERE status <> 'RUNNING' AND run_at IS NOT NULL AND fair_key IS NOT NULL AND batch_key IS NULL AND flow_key IS NULL;

-- Per priority level, the lane its last claim stopped after: a key, or null for the lane of the
-- jobs without a key. No row: the next claim starts with that lane.
CREATE TABLE skiplock.fair_cursor (
  priority smallint PRIMARY KEY,
  lane     text
);

-- One lane's due jobs at one level, at most `lim`, locked: `lane` null is the jobs without a key.
-- `taken`: the jobs this claim took already (it holds their locks, so SKIP LOCKED does not skip them).
-- (PL/pgSQL, not SQL: its two statements' plans are kept for the session; a SQL function's body
-- would be planned again on every call, a hundred times per claim.)
CREATE FUNCTION skiplock.fair_lane_jobs(p smallint, lane text, lim int, at timestamptz, budget_ms int, task_names text[], mine xid, taken bigint[])
  RETURNS bigint[]
  LANGUAGE plpgsql VOLATILE
AS $$
BEGIN
  IF lane IS NULL THEN
    RETURN ARRAY(
      SELECT j.id FROM skiplock.queue j
       WHERE j.status <> 'RUNNING' AND j.run_at IS NOT NULL AND j.fair_key IS NULL AND j.batch_key IS NULL AND j.priority = p
         AND j.run_at <= at AND j.timeout_ms <= budget_ms AND j.attempts < j.max_attempts AND j.task = ANY(task_names)
         AND j.xmin IS DISTINCT FROM mine AND j.id <> ALL(taken)
       ORDER BY j.priority DESC, j.run_at, j.id
       LIMIT lim
       FOR UPDATE SKIP LOCKED);
  END IF;
  RETURN ARRAY(
    SELECT j.id FROM skiplock.queue j
     WHERE j.status <> 'RUNNING' AND j.run_at IS NOT NULL AND j.fair_key IS NOT NULL AND j.batch_key IS NULL AND j.flow_key IS NULL
       AND j.priority = p AND j.fair_key = lane
       AND j.run_at <= at AND j.timeout_ms <= budget_ms AND j.attempts < j.max_attempts AND j.task = ANY(task_names)
       AND j.xmin IS DISTINCT FROM mine AND j.id <> ALL(taken)
     ORDER BY j.priority DESC, j.fair_key, j.run_at, j.id
     LIMIT lim
     FOR UPDATE SKIP LOCKED);
END
$$;

-- The first key after `after` (all keys when null) at level p with a job due: one probe of
-- job_fair_idx per key passed (a key's first entry is its earliest job), at most `probes` of them.
-- (Each bound its own statement: a cached generic plan cannot bound the index by `k IS NULL OR
-- fair_key > k`, and walked every entry of the keys before k.)
CREATE FUNCTION skiplock.next_fair_lane(p smallint, after text, at timestamptz, probes int) RETURNS text
  LANGUAGE plpgsql STABLE
AS $$
DECLARE
  k text := after;
  first_at timestamptz;
BEGIN
  FOR i IN 1 .. probes LOOP
    IF k IS NULL THEN
      SELECT j.fair_key, j.run_at INTO k, first_at FROM skiplock.queue j
       WHERE j.status <> 'RUNNING' AND j.run_at IS NOT NULL AND j.fair_key IS NOT NULL AND j.batch_key IS NULL AND j.flow_key IS NULL
         AND j.priority = p
       ORDER BY j.priority DESC, j.fair_key, j.run_at
       LIMIT 1;
    ELSE
      SELECT j.fair_key, j.run_at INTO k, first_at FROM skiplock.queue j
       WHERE j.status <> 'RUNNING' AND j.run_at IS NOT NULL AND j.fair_key IS NOT NULL AND j.batch_key IS NULL AND j.flow_key IS NULL
         AND j.priority = p AND j.fair_key > k
       ORDER BY j.priority DESC, j.fair_key, j.run_at
       LIMIT 1;
    END IF;
    IF NOT FOUND THEN RETURN NULL; END IF;
    IF first_at <= at THEN RETURN k; END IF;
  END LOOP;
  RETURN NULL;
END
$$;

-- The claim of one level: a round over its lanes from the cursor, one job each; then, with room
-- left, equal shares for the lanes that gave one, and the remainder one each (the cursor moves).
-- A lane is a key (text) or the jobs without a key (null, placed before every key).
CREATE FUNCTION skiplock.claim_fair_level(p smallint, lim int, at timestamptz, budget_ms int, task_names text[], mine xid)
  RETURNS bigint[]
  LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
  claimed bigint[] := '{}';
  got bigint[];
  has_cursor boolean := false;
  cursor_lane text;
  start_lane text;
  lane text;
  wrapped boolean := false;
  served text[] := '{}';
  last_lane text;
  moved boolean := false;
  visits int := 0;
  q int;
  kept text[];
BEGIN
  SELECT true, c.lane INTO has_cursor, cursor_lane FROM skiplock.fair_cursor c WHERE c.priority = p;
  has_cursor := coalesce(has_cursor, false);
  -- The round starts after the cursor's lane (the keyless lane when there is none) ...
  start_lane := CASE WHEN has_cursor THEN skiplock.next_fair_lane(p, cursor_lane, at, 1000) END;
  lane := start_lane;
  LOOP
    visits := visits + 1;
    got := skiplock.fair_lane_jobs(p, lane, 1, at, budget_ms, task_names, mine, claimed);
    last_lane := lane;
    moved := true;
    IF cardinality(got) > 0 THEN
      claimed := claimed || got;
      served := served || lane;
    END IF;
    EXIT WHEN cardinality(claimed) >= lim OR visits >= 1000;
    -- ... and ends where it started: the keyless lane comes after the last key.
    lane := skiplock.next_fair_lane(p, lane, at, 1000);
    IF lane IS NULL THEN
      EXIT WHEN start_lane IS NULL OR wrapped;
      wrapped := true;
    ELSIF wrapped AND (start_lane IS NULL OR lane >= start_lane) THEN
      EXIT;
    END IF;
  END LOOP;
  IF cardinality(claimed) < lim AND visits < 1000 THEN
    -- A whole round, with room left: equal shares while every lane gives its share ...
    LOOP
      q := (lim - cardinality(claimed)) / greatest(cardinality(served), 1);
      EXIT WHEN cardinality(served) = 0 OR q = 0;
      kept := '{}';
      FOREACH lane IN ARRAY served LOOP
        got := skiplock.fair_lane_jobs(p, lane, q, at, budget_ms, task_names, mine, claimed);
        claimed := claimed || got;
        IF cardinality(got) = q THEN kept := kept || lane; END IF;
      END LOOP;
      served := kept;
    END LOOP;
    -- ... then one each in the round's order, and the cursor stops after the last lane served.
    moved := false;
    FOREACH lane IN ARRAY served LOOP
      EXIT WHEN cardinality(claimed) >= lim;
      got := skiplock.fair_lane_jobs(p, lane, 1, at, budget_ms, task_names, mine, claimed);
      IF cardinality(got) > 0 THEN
        claimed := claimed || got;
        last_lane := lane;
        moved := true;
      END IF;
    END LOOP;
  END IF;
  -- Never waited for (SKIP LOCKED): a concurrent claim of the level moves it instead.
  IF moved THEN
    UPDATE skiplock.fair_cursor c SET lane = last_lane
     WHERE c.priority = p AND c.priority IN (SELECT c2.priority FROM skiplock.fair_cursor c2 WHERE c2.priority = p FOR UPDATE SKIP LOCKED);
    IF NOT FOUND THEN
      INSERT INTO skiplock.fair_cursor (priority, lane) VALUES (p, last_lane) ON CONFLICT (priority) DO NOTHING;
    END IF;
  END IF;
  RETURN claimed;
END
$$;

-- The claim when a fair job is due: the levels from the highest down, each by claim_fair_level.
-- (Its statements and those of the functions it calls run on generic plans, planned once per
-- session: a custom plan per call, PostgreSQL's choice for these small probes, planned two hundred
-- statements for a claim of a hundred jobs, two thirds of its time.)
CREATE FUNCTION skiplock.claim_fair_jobs(lim int, at timestamptz, budget_ms int, task_names text[]) RETURNS SETOF bigint
  LANGUAGE plpgsql VOLATILE ROWS 100
  SET enable_sort = off
  SET enable_bitmapscan = off
  SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
  mine xid := xid(pg_current_xact_id_if_assigned());
  p smallint;
  got bigint[];
  remaining int := lim;
BEGIN
  IF lim <= 0 THEN RETURN; END IF;
  p := skiplock.fair_level_below(NULL, at);
  WHILE p IS NOT NULL AND remaining > 0 LOOP
    got := skiplock.claim_fair_level(p, remaining, at, budget_ms, task_names, mine);
    remaining := remaining - cardinality(got);
    RETURN QUERY SELECT unnest(got);
    p := skiplock.fair_level_below(p, at);
  END LOOP;
END
$$;

-- The highest level below `below` (any level when null) where a job, fair or not, is due: the
-- first entries of the plain claim's index and of job_fair_due_idx, level by level. (Each bound its
-- own statement, as in next_fair_lane: `p IS NULL OR priority < p` walked the whole level.)
CREATE FUNCTION skiplock.fair_level_below(below smallint, at timestamptz) RETURNS smallint
  LANGUAGE plpgsql STABLE
AS $$
DECLARE
  p smallint := below;
  plain smallint;
  fair smallint;
BEGIN
  LOOP
    IF p IS NULL THEN
      SELECT max(j.priority) INTO plain FROM skiplock.queue j
       WHERE j.status <> 'RUNNING' AND j.run_at IS NOT NULL AND j.fair_key IS NULL AND j.batch_key IS NULL;
      SELECT max(j.priority) INTO fair FROM skiplock.queue j
       WHERE j.status <> 'RUNNING' AND j.run_at IS NOT NULL AND j.fair_key IS NOT NULL AND j.batch_key IS NULL AND j.flow_key IS NULL;
    ELSE
      SELECT max(j.priority) INTO plain FROM skiplock.queue j
       WHERE j.status <> 'RUNNING' AND j.run_at IS NOT NULL AND j.fair_key IS NULL AND j.batch_key IS NULL AND j.priority < p;
      SELECT max(j.priority) INTO fair FROM skiplock.queue j
       WHERE j.status <> 'RUNNING' AND j.run_at IS NOT NULL AND j.fair_key IS NOT NULL AND j.batch_key IS NULL AND j.flow_key IS NULL
         AND j.priority < p;
    END IF;
    p := greatest(plain, fair);
    IF p IS NULL THEN RETURN NULL; END IF;
    IF EXISTS (SELECT 1 FROM skiplock.queue j
                WHERE j.status <> 'RUNNING' AND j.run_at IS NOT NULL AND j.fair_key IS NULL AND j.batch_key IS NULL AND j.priority = p AND j.run_at <= at)
    OR EXISTS (SELECT 1 FROM skiplock.queue j
                WHERE j.status <> 'RUNNING' AND j.run_at IS NOT NULL AND j.fair_key IS NOT NULL AND j.batch_key IS NULL AND j.flow_key IS NULL
                  AND j.priority = p AND j.run_at <= at) THEN
      RETURN p;
    END IF;
  END LOOP;
END
$$;

-- When the next fair job is due, for the wake state (beside next_claimable_at): level by level,
-- the first entry of job_fair_due_idx that this deployment may claim.
CREATE FUNCTION skiplock.next_fair_at(task_names text[], budget_ms int) RETURNS timestamptz
  LANGUAGE sql STABLE
  SET enable_sort = off
  SET enable_bitmapscan = off
AS $$
  WITH RECURSIVE priorities(priority) AS (
    SELECT max(priority) FROM skiplock.queue
     WHERE status <> 'RUNNING' AND run_at IS NOT NULL AND fair_key IS NOT NULL AND batch_key IS NULL AND flow_key IS NULL
    UNION ALL
    SELECT (SELECT max(j.priority) FROM skiplock.queue j
             WHERE j.status <> 'RUNNING' AND j.run_at IS NOT NULL AND j.fair_key IS NOT NULL AND j.batch_key IS NULL AND j.flow_key IS NULL
               AND j.priority < p.priority)
      FROM priorities p WHERE p.priority IS NOT NULL
  )
  SELECT min((SELECT j.run_at FROM skiplock.queue j
               WHERE j.status <> 'RUNNING' AND j.run_at IS NOT NULL AND j.fair_key IS NOT NULL AND j.batch_key IS NULL AND j.flow_key IS NULL
                 AND j.priority = p.priority
                 AND (task_names IS NULL OR j.task = ANY(task_names)) AND j.attempts < j.max_attempts AND j.timeout_ms <= budget_ms
               ORDER BY j.priority DESC, j.run_at
               LIMIT 1))
    FROM priorities p WHERE p.priority IS NOT NULL
$$;
