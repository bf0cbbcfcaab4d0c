-- Flow control, from a review: the limited claim's round of the keys (migration 010) started at
-- a "random point" that was not random. The start key was md5(random()), 32 hex characters: every
-- key after 'f' in sort order (user-…, tenant-…, most e-mails) sorted after any start, so every
-- claim began at the task's first key. A claim visits at most 1,000 keys, counting keys with
-- nothing due and the keys of tasks it does not claim (paused, another deployment's): behind
-- 1,000 such keys a due job was never claimed.
--
-- Now a claim walks only its own tasks (in a rotated order), each from where the last claim of
-- that task stopped (skiplock.flow_cursor), so every key is reached within ceil(keys / 1,000)
-- claims, whatever the keys look like. The cursor is written only by a claim that stopped before
-- the end of its round (full, or 1,000 keys visited), and never waited for: a claim that finds it
-- locked by another leaves it to that one.
CREATE TABLE skiplock.flow_cursor (
  task     text PRIMARY KEY,
  -- The last key a claim of this task visited; the next claim starts after it.
  flow_key text NOT NULL,
  rate_key text NOT NULL
);

CREATE OR REPLACE FUNCTION skiplock.claim_limited(lim int, at timestamptz, budget_ms int, limits jsonb) RETURNS SETOF bigint
  LANGUAGE plpgsql VOLATILE ROWS 100
AS $$
DECLARE
  names text[] := ARRAY(SELECT e->>'task' FROM jsonb_array_elements(limits) e);
  tname text;
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
  -- Where this claim's round of the tasks starts.
  rot int := floor(random() * cardinality(names))::int;
  cf text;
  cr text;
  last_fk text;
  last_rk text;
  stopped boolean;
BEGIN
  IF lim <= 0 OR cardinality(names) = 0 THEN RETURN; END IF;
  PERFORM pg_advisory_xact_lock(hashtextextended('skiplock/g/' || x.task, 0))
     FROM (SELECT e->>'task' AS task FROM jsonb_array_elements(limits) e
            WHERE jsonb_typeof(e->'global') = 'number' ORDER BY 1) x;
  FOR i IN 0 .. cardinality(names) - 1 LOOP
    EXIT WHEN remaining <= 0 OR visited >= 1000;
    tname := names[1 + (rot + i) % cardinality(names)];
    SELECT e INTO l FROM jsonb_array_elements(limits) e WHERE e->>'task' = tname;
    -- No cursor yet: ('', '') sorts first, so the round is simply every key in order.
    SELECT c.flow_key, c.rate_key INTO cf, cr FROM skiplock.flow_cursor c WHERE c.task = tname;
    cf := coalesce(cf, '');
    cr := coalesce(cr, '');
    last_fk := NULL;
    stopped := false;
    -- The task's keys with QUEUED jobs, by a skip-scan of job_flow_queued_idx (one probe per key,
    -- never a walk over a key's backlog): those after the cursor, then the rest. Read lazily (a
    -- FOR loop reads its query through a cursor): it stops when the claim is full.
    FOR g IN
      WITH RECURSIVE
      -- (No "task = tname" inside the probes: with it the planner may take job_task_id_idx and
      -- sort a task's every job per probe. The row comparison alone is job_flow_queued_idx's
      -- index condition; the walk ends where the task does.)
      after_start(task, fk, rk) AS (
        (SELECT j.task, j.flow_key, j.rate_key FROM skiplock.job j
          WHERE j.status = 'QUEUED' AND j.flow_key IS NOT NULL AND (j.task, j.flow_key, j.rate_key) > (tname, cf, cr)
          ORDER BY j.task, j.flow_key, j.rate_key LIMIT 1)
        UNION ALL
        SELECT n.* FROM after_start a CROSS JOIN LATERAL (
          SELECT j.task, j.flow_key, j.rate_key FROM skiplock.job j
           WHERE j.status = 'QUEUED' AND j.flow_key IS NOT NULL AND (j.task, j.flow_key, j.rate_key) > (a.task, a.fk, a.rk)
           ORDER BY j.task, j.flow_key, j.rate_key LIMIT 1) n
         WHERE a.task = tname
      ),
      up_to_start(task, fk, rk) AS (
        (SELECT j.task, j.flow_key, j.rate_key FROM skiplock.job j
          WHERE j.status = 'QUEUED' AND j.flow_key IS NOT NULL AND (j.task, j.flow_key, j.rate_key) >= (tname, '', '')
          ORDER BY j.task, j.flow_key, j.rate_key LIMIT 1)
        UNION ALL
        SELECT n.* FROM up_to_start a CROSS JOIN LATERAL (
          SELECT j.task, j.flow_key, j.rate_key FROM skiplock.job j
           WHERE j.status = 'QUEUED' AND j.flow_key IS NOT NULL AND (j.task, j.flow_key, j.rate_key) > (a.task, a.fk, a.rk)
           ORDER BY j.task, j.flow_key, j.rate_key LIMIT 1) n
         WHERE a.task = tname AND (a.task, a.fk, a.rk) <= (tname, cf, cr)
      )
      SELECT fk, rk FROM after_start WHERE task = tname
      UNION ALL
      SELECT fk, rk FROM up_to_start WHERE task = tname AND (task, fk, rk) <= (tname, cf, cr)
    LOOP
      IF remaining <= 0 OR visited >= 1000 THEN
        stopped := true;
        EXIT;
      END IF;
      visited := visited + 1;
      last_fk := g.fk;
      last_rk := g.rk;
      take := remaining;
      ckey := 'c/' || tname || '/' || g.fk;
      gkey := 'g/' || tname;
      IF jsonb_typeof(l->'global') = 'number' THEN
        -- Counted once per call (this claim holds the task's global lock: no other claim adds to it).
        IF NOT used ? ('n/' || gkey) THEN
          SELECT count(*) INTO n FROM skiplock.job WHERE status = 'RUNNING' AND task = tname AND flow_key IS NOT NULL;
          used := used || jsonb_build_object('n/' || gkey, n);
        END IF;
        take := least(take, (l->>'global')::int - (used->>('n/' || gkey))::int - coalesce((used->>gkey)::int, 0));
        CONTINUE WHEN take <= 0;
      END IF;
      IF jsonb_typeof(l->'limit') = 'number' THEN
        CONTINUE WHEN NOT pg_try_advisory_xact_lock(hashtextextended('skiplock/' || ckey, 0));
        SELECT count(*) INTO n FROM skiplock.job WHERE status = 'RUNNING' AND task = tname AND flow_key = g.fk;
        take := least(take, (l->>'limit')::int - n - coalesce((used->>ckey)::int, 0));
        CONTINUE WHEN take <= 0;
      END IF;
      IF jsonb_typeof(l->'rate') = 'number' THEN
        CONTINUE WHEN NOT pg_try_advisory_xact_lock(hashtextextended('skiplock/r/' || tname || '/' || g.rk, 0));
        SELECT greatest(at, max(s.started_at)) INTO t FROM skiplock.flow_start s WHERE s.task = tname AND s.rate_key = g.rk;
        DELETE FROM skiplock.flow_start s
         WHERE s.task = tname AND s.rate_key = g.rk AND s.started_at <= t - (l->>'period_ms')::bigint * interval '1 millisecond';
        SELECT count(*) INTO n FROM skiplock.flow_start s WHERE s.task = tname AND s.rate_key = g.rk;
        take := least(take, (l->>'rate')::int - n);
        CONTINUE WHEN take <= 0;
      END IF;
      picked := ARRAY(
        SELECT j.id FROM skiplock.job j
         WHERE j.status = 'QUEUED' AND j.task = tname AND j.flow_key = g.fk AND j.rate_key = g.rk
           AND j.run_at <= at AND j.timeout_ms <= budget_ms AND j.attempts < j.max_attempts
         ORDER BY j.priority DESC, j.run_at, j.id
         LIMIT take
         FOR UPDATE SKIP LOCKED);
      take := cardinality(picked);
      CONTINUE WHEN take = 0;
      IF jsonb_typeof(l->'rate') = 'number' THEN
        INSERT INTO skiplock.flow_start (task, rate_key, started_at) SELECT tname, g.rk, t FROM generate_series(1, take);
      END IF;
      used := used || jsonb_build_object(ckey, coalesce((used->>ckey)::int, 0) + take, gkey, coalesce((used->>gkey)::int, 0) + take);
      remaining := remaining - take;
      RETURN QUERY SELECT unnest(picked);
    END LOOP;
    -- Stopped before the end of the round: the next claim of this task starts after the last key
    -- this one visited. Never waited for (SKIP LOCKED): a concurrent claim's cursor will do.
    IF stopped AND last_fk IS NOT NULL THEN
      UPDATE skiplock.flow_cursor c SET flow_key = last_fk, rate_key = last_rk
       WHERE c.task = tname AND c.task IN (SELECT c2.task FROM skiplock.flow_cursor c2 WHERE c2.task = tname FOR UPDATE SKIP LOCKED);
      IF NOT FOUND THEN
        INSERT INTO skiplock.flow_cursor (task, flow_key, rate_key) VALUES (tname, last_fk, last_rk) ON CONFLICT (task) DO NOTHING;
      END IF;
    END IF;
  END LOOP;
END
$$;
