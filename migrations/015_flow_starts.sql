-- Issue 21: what a rate limit counts, and what keeps a schedule's run live.
--
-- 1. A start is recorded only for a job its claim really took (item 2). claim_limited (migration
-- 014) recorded its starts itself, from queries with fresh snapshots: it could lock, and count, a
-- row the calling statement's own result write had just put back in the queue (a zero-delay retry,
-- a release, a yield, a woken parent), or a job committed after that statement's snapshot. The
-- statement's UPDATE cannot take either (a statement updates a row once; a row newer than its
-- snapshot is invisible to it), so the job stayed QUEUED and its phantom start still counted.
-- claim_limited_jobs returns each job it picked with the instant its start is to be recorded at;
-- the calling statement records the starts of the jobs its UPDATE took (completeAndClaim's
-- `started`), before the commit that releases the key's lock: the count stays exact. It also
-- leaves the rows this transaction wrote (xmin = its own xid) to the next claim: the UPDATE could
-- not take them, and the claim's room would go to them.
--
-- 2. A start is counted once per attempt (item 6). A resume of the same attempt — after ctx.sleep,
-- a yield between steps, its children's end, a release by the worker — gives the attempt back
-- (attempts − 1) and is not a new start: rate_attempt is the attempt whose start was counted, so a
-- QUEUED job with rate_attempt = attempts + 1 is resuming. It is claimed without a start, even
-- while its key's window is full. A retry after a failure spends its attempt: a new start.
ALTER TABLE skiplock.job ADD COLUMN rate_attempt integer;

-- The resuming jobs of limited tasks: few at any time. The claim looks here first, so a key whose
-- window is full costs one probe, never a walk of its backlog.
CREATE INDEX job_flow_resume_idx ON skiplock.job (task, flow_key, rate_key, priority DESC, run_at, id)
  WHERE status = 'QUEUED' AND flow_key IS NOT NULL AND rate_attempt = attempts + 1;

-- 3. overlap 'skip' (item 3): a schedule's job WAITING for its children is live too.
DROP INDEX skiplock.job_schedule_live_idx;
CREATE INDEX job_schedule_live_idx ON skiplock.job (schedule_name)
  WHERE schedule_name IS NOT NULL AND status IN ('QUEUED', 'RUNNING', 'WAITING');

-- claim_limited_jobs: migration 014's claim_limited (kept unchanged for deployments not yet
-- upgraded), except that it returns each job with the instant of its start (null: none to record,
-- a resume or a task without a rate limit) and records nothing itself (1), takes a key's resumes
-- first and without a start (2), and skips the rows this transaction wrote (1).
CREATE FUNCTION skiplock.claim_limited_jobs(lim int, at timestamptz, budget_ms int, limits jsonb)
  RETURNS TABLE (job_id bigint, start_at timestamptz)
  LANGUAGE plpgsql VOLATILE ROWS 100
AS $$
DECLARE
  names text[] := ARRAY(SELECT e->>'task' FROM jsonb_array_elements(limits) e);
  tname text;
  l jsonb;
  g record;
  remaining int := lim;
  resumed bigint[];
  fresh bigint[];
  room int;
  rkey text;
  -- This transaction's xid, if it has written yet: rows it wrote are left alone (see 1).
  mine xid := xid(pg_current_xact_id_if_assigned());
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
        rkey := 'r/' || tname || '/' || g.rk;
        room := 0;
        IF pg_try_advisory_xact_lock(hashtextextended('skiplock/r/' || tname || '/' || g.rk, 0)) THEN
          SELECT greatest(at, max(s.started_at)) INTO t FROM skiplock.flow_start s WHERE s.task = tname AND s.rate_key = g.rk;
          DELETE FROM skiplock.flow_start s
           WHERE s.task = tname AND s.rate_key = g.rk AND s.started_at <= t - (l->>'period_ms')::bigint * interval '1 millisecond';
          SELECT count(*) INTO n FROM skiplock.flow_start s WHERE s.task = tname AND s.rate_key = g.rk;
          -- (This claim's starts of the key are recorded by its caller: counted here meanwhile.)
          room := (l->>'rate')::int - n - coalesce((used->>rkey)::int, 0);
        END IF;
        -- Resumes first, whatever the window holds: their start was counted when their attempt began.
        resumed := ARRAY(
          SELECT j.id FROM skiplock.job j
           WHERE j.status = 'QUEUED' AND j.task = tname AND j.flow_key = g.fk AND j.rate_key = g.rk
             AND j.rate_attempt = j.attempts + 1
             AND j.run_at <= at AND j.timeout_ms <= budget_ms AND j.attempts < j.max_attempts
             AND j.xmin IS DISTINCT FROM mine
           ORDER BY j.priority DESC, j.run_at, j.id
           LIMIT take
           FOR UPDATE SKIP LOCKED);
        take := least(take - cardinality(resumed), room);
        fresh := CASE WHEN take > 0 THEN ARRAY(
          SELECT j.id FROM skiplock.job j
           WHERE j.status = 'QUEUED' AND j.task = tname AND j.flow_key = g.fk AND j.rate_key = g.rk
             AND j.rate_attempt IS DISTINCT FROM j.attempts + 1
             AND j.run_at <= at AND j.timeout_ms <= budget_ms AND j.attempts < j.max_attempts
             AND j.xmin IS DISTINCT FROM mine
           ORDER BY j.priority DESC, j.run_at, j.id
           LIMIT take
           FOR UPDATE SKIP LOCKED) ELSE '{}' END;
        used := used || jsonb_build_object(rkey, coalesce((used->>rkey)::int, 0) + cardinality(fresh));
      ELSE
        resumed := '{}';
        fresh := ARRAY(
          SELECT j.id FROM skiplock.job j
           WHERE j.status = 'QUEUED' AND j.task = tname AND j.flow_key = g.fk AND j.rate_key = g.rk
             AND j.run_at <= at AND j.timeout_ms <= budget_ms AND j.attempts < j.max_attempts
             AND j.xmin IS DISTINCT FROM mine
           ORDER BY j.priority DESC, j.run_at, j.id
           LIMIT take
           FOR UPDATE SKIP LOCKED);
      END IF;
      take := cardinality(resumed) + cardinality(fresh);
      CONTINUE WHEN take = 0;
      used := used || jsonb_build_object(ckey, coalesce((used->>ckey)::int, 0) + take, gkey, coalesce((used->>gkey)::int, 0) + take);
      remaining := remaining - take;
      RETURN QUERY SELECT unnest(resumed), NULL::timestamptz;
      RETURN QUERY SELECT unnest(fresh), CASE WHEN jsonb_typeof(l->'rate') = 'number' THEN t END;
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
