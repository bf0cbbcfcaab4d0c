-- Flow control (issue 14): per-key concurrency limits and sliding-window rate limits.
--
-- A job of a task with a limit carries its keys, computed from its payload at enqueue
-- (src/runtime/flow-key.ts): flow_key for the concurrency limit, rate_key for the rate limit; ''
-- when the limit has no key. Jobs of tasks without flow control keep both NULL and are claimed by
-- skiplock.claimable_jobs exactly as before: nothing below is read or written for them (the new
-- indexes are partial on flow_key IS NOT NULL).
ALTER TABLE skiplock.job ADD COLUMN flow_key text, ADD COLUMN rate_key text;

-- The limited claim's scan: one entry per QUEUED job of a limited task, grouped by key, so the
-- next job of each key is its group's first entry.
CREATE INDEX job_flow_queued_idx ON skiplock.job (task, flow_key, rate_key, priority DESC, run_at, id)
  WHERE status = 'QUEUED' AND flow_key IS NOT NULL;
-- The slots in use: a key's RUNNING jobs. Slots are these rows themselves, not a counter, so a job
-- that stops running (done, retried, released, reaped, cancelled) frees its slot in the statement
-- that moves it, whichever statement that is.
CREATE INDEX job_flow_running_idx ON skiplock.job (task, flow_key) WHERE status = 'RUNNING' AND flow_key IS NOT NULL;

-- The starts of rate-limited jobs still inside their window, per (task, rate key), on the
-- database clock. Rows older than the period are deleted by the next claim of the key.
CREATE TABLE skiplock.flow_start (
  task       text        NOT NULL,
  rate_key   text        NOT NULL,
  started_at timestamptz NOT NULL
);
CREATE INDEX flow_start_key_idx ON skiplock.flow_start (task, rate_key, started_at);

-- Claims up to `lim` due jobs of the limited tasks described by `limits`, a JSON array of
--   {"task": name, "limit": n?, "global": n?, "rate": n?, "period_ms": ms?}
-- (limit: concurrency per flow_key; global: concurrency of the task over all keys; rate: starts
-- per period_ms per rate_key). Returns the ids it locked (FOR UPDATE); the caller's UPDATE makes
-- them RUNNING in the same statement, and their starts are already recorded in flow_start.
--
-- Exactness: a key is counted and claimed only by the transaction holding its advisory lock
-- (pg_advisory_xact_lock: held until commit, released after the commit is visible). In a VOLATILE
-- plpgsql function every query takes a new snapshot, so the count made after the lock is taken
-- sees every claim committed before it: no two claims of a key ever count from the same state.
-- A key whose lock another claim holds is skipped (pg_try_advisory_xact_lock), not waited for,
-- and a full key is skipped: neither blocks the other keys. The global lock of a task with a
-- global limit is waited for, all of them first and in name order (no deadlock).
--
-- Rate: a key's starts are recorded at t = greatest(at, its latest start) (per key monotonic),
-- and at most `rate` of them lie in (t − period, t]: no window of period_ms ever holds more.
CREATE FUNCTION skiplock.claim_limited(lim int, at timestamptz, budget_ms int, limits jsonb) RETURNS SETOF bigint
  LANGUAGE plpgsql VOLATILE ROWS 100
AS $$
DECLARE
  names text[] := ARRAY(SELECT e->>'task' FROM jsonb_array_elements(limits) e);
  l jsonb;
  g record;
  remaining int := lim;
  picked bigint[];
  used jsonb := '{}'::jsonb;
  take int;
  n int;
  t timestamptz;
  ckey text;
  gkey text;
BEGIN
  IF lim <= 0 OR cardinality(names) = 0 THEN RETURN; END IF;
  PERFORM pg_advisory_xact_lock(hashtextextended('skiplock/g/' || x.task, 0))
     FROM (SELECT e->>'task' AS task FROM jsonb_array_elements(limits) e
            WHERE jsonb_typeof(e->'global') = 'number' ORDER BY 1) x;
  FOR g IN
    SELECT c.task, c.fk, c.rk FROM (
      SELECT DISTINCT ON (j.task, j.flow_key, j.rate_key) j.task, j.flow_key AS fk, j.rate_key AS rk, j.priority, j.run_at, j.id
        FROM skiplock.job j
       WHERE j.status = 'QUEUED' AND j.flow_key IS NOT NULL AND j.task = ANY(names)
         AND j.run_at <= at AND j.timeout_ms <= budget_ms AND j.attempts < j.max_attempts
       ORDER BY j.task, j.flow_key, j.rate_key, j.priority DESC, j.run_at, j.id) c
    ORDER BY c.priority DESC, c.run_at, c.id
  LOOP
    EXIT WHEN remaining <= 0;
    SELECT e INTO l FROM jsonb_array_elements(limits) e WHERE e->>'task' = g.task;
    take := remaining;
    ckey := 'c/' || g.task || '/' || g.fk;
    gkey := 'g/' || g.task;
    IF jsonb_typeof(l->'global') = 'number' THEN
      -- Counted once per call (this claim holds the task's global lock: no other claim adds to it).
      IF NOT used ? ('n/' || gkey) THEN
        SELECT count(*) INTO n FROM skiplock.job WHERE status = 'RUNNING' AND task = g.task AND flow_key IS NOT NULL;
        used := used || jsonb_build_object('n/' || gkey, n);
      END IF;
      take := least(take, (l->>'global')::int - (used->>('n/' || gkey))::int - coalesce((used->>gkey)::int, 0));
      CONTINUE WHEN take <= 0;
    END IF;
    IF jsonb_typeof(l->'limit') = 'number' THEN
      CONTINUE WHEN NOT pg_try_advisory_xact_lock(hashtextextended('skiplock/' || ckey, 0));
      SELECT count(*) INTO n FROM skiplock.job WHERE status = 'RUNNING' AND task = g.task AND flow_key = g.fk;
      take := least(take, (l->>'limit')::int - n - coalesce((used->>ckey)::int, 0));
      CONTINUE WHEN take <= 0;
    END IF;
    IF jsonb_typeof(l->'rate') = 'number' THEN
      CONTINUE WHEN NOT pg_try_advisory_xact_lock(hashtextextended('skiplock/r/' || g.task || '/' || g.rk, 0));
      SELECT greatest(at, max(s.started_at)) INTO t FROM skiplock.flow_start s WHERE s.task = g.task AND s.rate_key = g.rk;
      DELETE FROM skiplock.flow_start s
       WHERE s.task = g.task AND s.rate_key = g.rk AND s.started_at <= t - (l->>'period_ms')::bigint * interval '1 millisecond';
      SELECT count(*) INTO n FROM skiplock.flow_start s WHERE s.task = g.task AND s.rate_key = g.rk;
      take := least(take, (l->>'rate')::int - n);
      CONTINUE WHEN take <= 0;
    END IF;
    picked := ARRAY(
      SELECT j.id FROM skiplock.job j
       WHERE j.status = 'QUEUED' AND j.task = g.task AND j.flow_key = g.fk AND j.rate_key = g.rk
         AND j.run_at <= at AND j.timeout_ms <= budget_ms AND j.attempts < j.max_attempts
       ORDER BY j.priority DESC, j.run_at, j.id
       LIMIT take
       FOR UPDATE SKIP LOCKED);
    take := cardinality(picked);
    CONTINUE WHEN take = 0;
    IF jsonb_typeof(l->'rate') = 'number' THEN
      INSERT INTO skiplock.flow_start (task, rate_key, started_at) SELECT g.task, g.rk, t FROM generate_series(1, take);
    END IF;
    used := used || jsonb_build_object(ckey, coalesce((used->>ckey)::int, 0) + take, gkey, coalesce((used->>gkey)::int, 0) + take);
    remaining := remaining - take;
    RETURN QUERY SELECT unnest(picked);
  END LOOP;
END
$$;
