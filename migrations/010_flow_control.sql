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
  visited int := 0;
  -- Where this claim's round of the keys starts.
  st text := names[1 + floor(random() * cardinality(names))::int];
  sk text := md5(random()::text);
BEGIN
  IF lim <= 0 OR cardinality(names) = 0 THEN RETURN; END IF;
  PERFORM pg_advisory_xact_lock(hashtextextended('skiplock/g/' || x.task, 0))
     FROM (SELECT e->>'task' AS task FROM jsonb_array_elements(limits) e
            WHERE jsonb_typeof(e->'global') = 'number' ORDER BY 1) x;
  -- The keys with QUEUED jobs, by a skip-scan of job_flow_queued_idx (one probe per key, never a
  -- walk over a key's backlog), from a random point and round: a claim that runs out of room, or
  -- past 1,000 keys, leaves the other keys to the next claims, whichever key sorts first. Read
  -- lazily (a FOR loop reads its query through a cursor): it stops when the claim is full.
  FOR g IN
    WITH RECURSIVE
    after_start(task, fk, rk) AS (
      (SELECT j.task, j.flow_key, j.rate_key FROM skiplock.job j
        WHERE j.status = 'QUEUED' AND j.flow_key IS NOT NULL AND (j.task, j.flow_key, j.rate_key) > (st, sk, '')
        ORDER BY j.task, j.flow_key, j.rate_key LIMIT 1)
      UNION ALL
      SELECT n.* FROM after_start a CROSS JOIN LATERAL (
        SELECT j.task, j.flow_key, j.rate_key FROM skiplock.job j
         WHERE j.status = 'QUEUED' AND j.flow_key IS NOT NULL AND (j.task, j.flow_key, j.rate_key) > (a.task, a.fk, a.rk)
         ORDER BY j.task, j.flow_key, j.rate_key LIMIT 1) n
    ),
    up_to_start(task, fk, rk) AS (
      (SELECT j.task, j.flow_key, j.rate_key FROM skiplock.job j
        WHERE j.status = 'QUEUED' AND j.flow_key IS NOT NULL AND (j.task, j.flow_key, j.rate_key) <= (st, sk, '')
        ORDER BY j.task, j.flow_key, j.rate_key LIMIT 1)
      UNION ALL
      SELECT n.* FROM up_to_start a CROSS JOIN LATERAL (
        SELECT j.task, j.flow_key, j.rate_key FROM skiplock.job j
         WHERE j.status = 'QUEUED' AND j.flow_key IS NOT NULL
           AND (j.task, j.flow_key, j.rate_key) > (a.task, a.fk, a.rk) AND (j.task, j.flow_key, j.rate_key) <= (st, sk, '')
         ORDER BY j.task, j.flow_key, j.rate_key LIMIT 1) n
    )
    SELECT * FROM after_start UNION ALL SELECT * FROM up_to_start
  LOOP
    EXIT WHEN remaining <= 0;
    visited := visited + 1;
    EXIT WHEN visited > 1000;
    -- (Another deployment's limited tasks share the index: passed over here, not in the scan,
    -- whose row comparison is then its index condition.)
    CONTINUE WHEN NOT (g.task = ANY(names));
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
