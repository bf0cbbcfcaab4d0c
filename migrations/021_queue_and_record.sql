-- The data model of issue 33: a narrow queue for live jobs, and the job's record, written when it
-- is enqueued and when it ends (docs/architecture.md, "The data model").
--
-- skiplock.queue holds a row for each live job (QUEUED, RUNNING, WAITING): what the claim, the
-- reaper, flow control, debounce, cancelOn and the leases read and write, and nothing else (no
-- payload, no result). A job's row is inserted with its record and deleted by the statement that
-- ends it, so the queue's index entries die with their rows and its size is the live jobs'.
--
-- skiplock.job_record is the table that was skiplock.job (renamed: its rows, ids, foreign keys
-- from job_step and cron_firing and its sequence stay). A job's record is written twice: at
-- enqueue, and at its end, when the end statement copies the queue row's last state into it. While
-- the job is live its record's status and live columns are a placeholder (what they were at
-- enqueue, or at the migration) that nothing reads: the queue row is the truth.
--
-- skiplock.job is now a view: the record with the queue's live columns laid over it, the same
-- columns in the same order as the table it replaces. What reads skiplock.job by hand (or an older
-- deployment's reads) reads what it always read. It cannot be written: an older deployment that
-- tries fails loudly instead of writing a row the new code would not see, and its claim functions
-- (same names and signatures, below) now read the queue, so its claiming statement fails on the
-- view's UPDATE and rolls back whole.

ALTER TABLE skiplock.job RENAME TO job_record;

CREATE TABLE skiplock.queue (
  id               bigint      PRIMARY KEY,
  task             text        NOT NULL,
  status           text        NOT NULL DEFAULT 'QUEUED' CHECK (status IN ('QUEUED', 'RUNNING', 'WAITING')),
  priority         smallint    NOT NULL DEFAULT 0,
  -- When the job is due: for QUEUED always; for WAITING its wake instant (a sleep's end, a wait's
  -- timeout), or null when only an event, a callback or its children wake it.
  run_at           timestamptz,
  attempts         integer     NOT NULL DEFAULT 0,
  max_attempts     integer     NOT NULL,
  timeout_ms       integer     NOT NULL,
  locked_by        text,
  locked_until     timestamptz,
  cancel_requested boolean     NOT NULL DEFAULT false,
  last_error       text,
  created_at       timestamptz NOT NULL,
  updated_at       timestamptz NOT NULL,
  started_at       timestamptz,
  history          jsonb       NOT NULL DEFAULT '[]'::jsonb,
  progress         jsonb,
  flow_key         text,
  rate_key         text,
  rate_attempt     integer,
  debounce_key     text,
  parent_id        bigint,
  pending_children integer     NOT NULL DEFAULT 0,
  step_count       integer     NOT NULL DEFAULT 0,
  wait_woken       boolean     NOT NULL DEFAULT false,
  cancel_on        text[],
  schedule_name    text,
  CONSTRAINT queue_attempts_in_range CHECK (attempts BETWEEN 0 AND max_attempts),
  CONSTRAINT queue_lease_iff_running CHECK (
    (status = 'RUNNING') = (locked_by IS NOT NULL AND locked_until IS NOT NULL)
    AND (status = 'RUNNING' OR (locked_by IS NULL AND locked_until IS NULL))
  ),
  CONSTRAINT queue_running_has_attempt CHECK (status <> 'RUNNING' OR attempts >= 1),
  CONSTRAINT queue_pending_children_in_range CHECK (pending_children >= 0),
  CONSTRAINT queue_due_unless_waiting CHECK (run_at IS NOT NULL OR status = 'WAITING')
);

-- The live jobs move: a copy of their live columns. Their records keep what they hold (a
-- placeholder from now on). Before the queue's indexes are built, so the copy writes no entries.
INSERT INTO skiplock.queue (id, task, status, priority, run_at, attempts, max_attempts, timeout_ms, locked_by, locked_until, cancel_requested, last_error, created_at, updated_at, started_at, history, progress, flow_key, rate_key, rate_attempt, debounce_key, parent_id, pending_children, step_count, wait_woken, cancel_on, schedule_name)
SELECT id, task, status, priority, run_at, attempts, max_attempts, timeout_ms, locked_by, locked_until, cancel_requested, last_error, created_at, updated_at, started_at, history, progress, flow_key, rate_key, rate_attempt, debounce_key, parent_id, pending_children, step_count, wait_woken, cancel_on, schedule_name FROM skiplock.job_record WHERE status IN ('QUEUED', 'RUNNING', 'WAITING');

-- Jobs read as what they are (CONTRACT "How jobs read"): a job its own handler suspended is
-- WAITING until it is due again, with its wake instant as run_at, or none. Before this migration a
-- sleep or a timed wait was QUEUED with a future run_at, and a WAITING job held a placeholder run_at.
UPDATE skiplock.queue q SET status = 'WAITING'
 WHERE q.status = 'QUEUED' AND EXISTS (
   SELECT 1 FROM skiplock.job_step s WHERE s.job_id = q.id
      AND ((s.kind = 'sleep' AND s.status = 'sleeping') OR (s.kind <> 'sleep' AND s.status = 'waiting')));
UPDATE skiplock.queue q SET run_at = (
   SELECT min(s.wake_at) FROM skiplock.job_step s WHERE s.job_id = q.id
      AND ((s.kind = 'sleep' AND s.status = 'sleeping') OR (s.kind <> 'sleep' AND s.status = 'waiting')))
 WHERE q.status = 'WAITING';

-- The live-state indexes move to the queue, with the same names as before on the job table.
DROP INDEX skiplock.job_claim_idx;
DROP INDEX skiplock.job_reap_idx;
DROP INDEX skiplock.job_schedule_live_idx;
DROP INDEX skiplock.job_flow_queued_idx;
DROP INDEX skiplock.job_flow_running_idx;
DROP INDEX skiplock.job_flow_resume_idx;
DROP INDEX skiplock.job_debounce_idx;
DROP INDEX skiplock.job_cancel_on_idx;
-- The claim's index holds every job that may become due by the clock alone: QUEUED ones and
-- WAITING ones with a wake instant (a sleep, a timed wait), so a claim takes a WAITING job whose
-- instant came in the same statement. WAITING ones without (children, an event) are not in it.
CREATE INDEX job_claim_idx ON skiplock.queue (priority DESC, run_at, id, timeout_ms, task) WHERE status <> 'RUNNING' AND run_at IS NOT NULL;
CREATE INDEX job_reap_idx ON skiplock.queue (locked_until) WHERE status = 'RUNNING';
CREATE INDEX job_schedule_live_idx ON skiplock.queue (schedule_name) WHERE schedule_name IS NOT NULL;
CREATE INDEX job_flow_queued_idx ON skiplock.queue (task, flow_key, rate_key, priority DESC, run_at, id)
  WHERE status <> 'RUNNING' AND run_at IS NOT NULL AND flow_key IS NOT NULL;
CREATE INDEX job_flow_running_idx ON skiplock.queue (task, flow_key) WHERE status = 'RUNNING' AND flow_key IS NOT NULL;
CREATE INDEX job_flow_resume_idx ON skiplock.queue (task, flow_key, rate_key, priority DESC, run_at, id)
  WHERE status <> 'RUNNING' AND run_at IS NOT NULL AND flow_key IS NOT NULL AND rate_attempt = attempts + 1;
CREATE UNIQUE INDEX job_debounce_idx ON skiplock.queue (task, debounce_key)
  WHERE status = 'QUEUED' AND debounce_key IS NOT NULL;
CREATE INDEX job_cancel_on_idx ON skiplock.queue USING gin (cancel_on) WHERE cancel_on IS NOT NULL;
CREATE INDEX queue_parent_idx ON skiplock.queue (parent_id) WHERE parent_id IS NOT NULL;

-- The record's end is one UPDATE that PostgreSQL can make HOT (a new version on the same page, no
-- index entry) when no indexed column changes. Its status and finish time do change, so the
-- record's indexes must not name them: finished_at gets a BRIN index (a summarizing index, which
-- does not prevent HOT since PostgreSQL 16), and the listing of failed jobs, which read
-- job_unfinished_id_idx (status <> 'DONE'), reads failed_status instead: DEAD or CANCELLED, set by
-- the end that fails the job and cleared by the retry that revives it; a DONE end leaves it null.
ALTER TABLE skiplock.job_record ADD COLUMN failed_status text;
ALTER TABLE skiplock.job_record ADD CONSTRAINT job_record_failed_status
  CHECK (failed_status IS NULL OR (failed_status = status AND status IN ('DEAD', 'CANCELLED'))) NOT VALID;
UPDATE skiplock.job_record SET failed_status = status WHERE status IN ('DEAD', 'CANCELLED');
CREATE INDEX job_failed_idx ON skiplock.job_record (failed_status, id DESC) WHERE failed_status IS NOT NULL;
-- Retention's next expiry of the failed ones (src/store/wakeup.ts), in finish order.
CREATE INDEX job_failed_finished_idx ON skiplock.job_record (failed_status, finished_at) WHERE failed_status IS NOT NULL;
DROP INDEX skiplock.job_unfinished_id_idx;
DROP INDEX skiplock.job_finished_idx;
CREATE INDEX job_finished_brin ON skiplock.job_record USING brin (finished_at);
-- Room on each page for the end's new version of the rows inserted there.
ALTER TABLE skiplock.job_record SET (fillfactor = 80);

-- (A WAITING job without a wake instant reads the record's run_at, its last due time: a job's runAt
-- is never null.)
CREATE VIEW skiplock.job AS
SELECT r.id,
       r.task,
       r.payload,
       CASE WHEN q.id IS NULL THEN r.status ELSE q.status END AS status,
       CASE WHEN q.id IS NULL THEN r.priority ELSE q.priority END AS priority,
       CASE WHEN q.id IS NULL THEN r.run_at ELSE coalesce(q.run_at, r.run_at) END AS run_at,
       CASE WHEN q.id IS NULL THEN r.attempts ELSE q.attempts END AS attempts,
       r.max_attempts,
       r.timeout_ms,
       CASE WHEN q.id IS NULL THEN r.locked_by ELSE q.locked_by END AS locked_by,
       CASE WHEN q.id IS NULL THEN r.locked_until ELSE q.locked_until END AS locked_until,
       CASE WHEN q.id IS NULL THEN r.cancel_requested ELSE q.cancel_requested END AS cancel_requested,
       CASE WHEN q.id IS NULL THEN r.last_error ELSE q.last_error END AS last_error,
       r.result,
       r.idempotency_key,
       r.schedule_name,
       r.scheduled_for,
       r.created_at,
       CASE WHEN q.id IS NULL THEN r.updated_at ELSE q.updated_at END AS updated_at,
       r.finished_at,
       r.schedule_state,
       CASE WHEN q.id IS NULL THEN r.started_at ELSE q.started_at END AS started_at,
       CASE WHEN q.id IS NULL THEN r.history ELSE q.history END AS history,
       CASE WHEN q.id IS NULL THEN r.progress ELSE q.progress END AS progress,
       r.traceparent,
       CASE WHEN q.id IS NULL THEN r.flow_key ELSE q.flow_key END AS flow_key,
       CASE WHEN q.id IS NULL THEN r.rate_key ELSE q.rate_key END AS rate_key,
       CASE WHEN q.id IS NULL THEN r.debounce_key ELSE q.debounce_key END AS debounce_key,
       r.parent_id,
       r.parent_step,
       CASE WHEN q.id IS NULL THEN r.pending_children ELSE q.pending_children END AS pending_children,
       CASE WHEN q.id IS NULL THEN r.step_count ELSE q.step_count END AS step_count,
       r.finished_by,
       r.finished_traceparent,
       CASE WHEN q.id IS NULL THEN r.rate_attempt ELSE q.rate_attempt END AS rate_attempt,
       CASE WHEN q.id IS NULL THEN r.wait_woken ELSE q.wait_woken END AS wait_woken,
       r.cancel_on,
       r.failed_status
  FROM skiplock.job_record r LEFT JOIN skiplock.queue q ON q.id = r.id;

-- The claim functions of migrations 003, 005 and 015, on the queue, where a job that may be claimed
-- is one the claim index holds (QUEUED, or WAITING with a wake instant).
CREATE OR REPLACE FUNCTION skiplock.claimable_jobs(lim int, at timestamptz, budget_ms int, task_names text[]) RETURNS SETOF bigint
  LANGUAGE sql VOLATILE ROWS 100
  SET enable_sort = off
  SET enable_bitmapscan = off
AS $$
  SELECT id FROM skiplock.queue
   WHERE status <> 'RUNNING' AND run_at IS NOT NULL AND run_at <= at AND timeout_ms <= budget_ms AND attempts < max_attempts
     AND task = ANY(task_names)
   ORDER BY priority DESC, run_at, id
   LIMIT lim
   FOR UPDATE SKIP LOCKED
$$;

CREATE OR REPLACE FUNCTION skiplock.next_claimable_at(task_names text[], budget_ms int) RETURNS timestamptz
  LANGUAGE sql STABLE
  SET enable_sort = off
  SET enable_bitmapscan = off
AS $$
  WITH RECURSIVE priorities(priority) AS (
    SELECT max(priority) FROM skiplock.queue WHERE status <> 'RUNNING' AND run_at IS NOT NULL
    UNION ALL
    SELECT (SELECT max(j.priority) FROM skiplock.queue j WHERE j.status <> 'RUNNING' AND j.run_at IS NOT NULL AND j.priority < p.priority)
      FROM priorities p WHERE p.priority IS NOT NULL
  )
  SELECT min((SELECT j.run_at FROM skiplock.queue j
               WHERE j.status <> 'RUNNING' AND j.run_at IS NOT NULL AND j.priority = p.priority
                 AND j.task = ANY(task_names) AND j.attempts < j.max_attempts AND j.timeout_ms <= budget_ms
               ORDER BY j.run_at
               LIMIT 1))
    FROM priorities p WHERE p.priority IS NOT NULL
$$;

CREATE OR REPLACE FUNCTION skiplock.claim_limited_jobs(lim int, at timestamptz, budget_ms int, limits jsonb)
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
        (SELECT j.task, j.flow_key, j.rate_key FROM skiplock.queue j
          WHERE j.status <> 'RUNNING' AND j.run_at IS NOT NULL AND j.flow_key IS NOT NULL AND (j.task, j.flow_key, j.rate_key) > (tname, cf, cr)
          ORDER BY j.task, j.flow_key, j.rate_key LIMIT 1)
        UNION ALL
        SELECT n.* FROM after_start a CROSS JOIN LATERAL (
          SELECT j.task, j.flow_key, j.rate_key FROM skiplock.queue j
           WHERE j.status <> 'RUNNING' AND j.run_at IS NOT NULL AND j.flow_key IS NOT NULL AND (j.task, j.flow_key, j.rate_key) > (a.task, a.fk, a.rk)
           ORDER BY j.task, j.flow_key, j.rate_key LIMIT 1) n
         WHERE a.task = tname
      ),
      up_to_start(task, fk, rk) AS (
        (SELECT j.task, j.flow_key, j.rate_key FROM skiplock.queue j
          WHERE j.status <> 'RUNNING' AND j.run_at IS NOT NULL AND j.flow_key IS NOT NULL AND (j.task, j.flow_key, j.rate_key) >= (tname, '', '')
          ORDER BY j.task, j.flow_key, j.rate_key LIMIT 1)
        UNION ALL
        SELECT n.* FROM up_to_start a CROSS JOIN LATERAL (
          SELECT j.task, j.flow_key, j.rate_key FROM skiplock.queue j
           WHERE j.status <> 'RUNNING' AND j.run_at IS NOT NULL AND j.flow_key IS NOT NULL AND (j.task, j.flow_key, j.rate_key) > (a.task, a.fk, a.rk)
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
          SELECT count(*) INTO n FROM skiplock.queue WHERE status = 'RUNNING' AND task = tname AND flow_key IS NOT NULL;
          used := used || jsonb_build_object('n/' || gkey, n);
        END IF;
        take := least(take, (l->>'global')::int - (used->>('n/' || gkey))::int - coalesce((used->>gkey)::int, 0));
        CONTINUE WHEN take <= 0;
      END IF;
      IF jsonb_typeof(l->'limit') = 'number' THEN
        CONTINUE WHEN NOT pg_try_advisory_xact_lock(hashtextextended('skiplock/' || ckey, 0));
        SELECT count(*) INTO n FROM skiplock.queue WHERE status = 'RUNNING' AND task = tname AND flow_key = g.fk;
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
          SELECT j.id FROM skiplock.queue j
           WHERE j.status <> 'RUNNING' AND j.run_at IS NOT NULL AND j.task = tname AND j.flow_key = g.fk AND j.rate_key = g.rk
             AND j.rate_attempt = j.attempts + 1
             AND j.run_at <= at AND j.timeout_ms <= budget_ms AND j.attempts < j.max_attempts
             AND j.xmin IS DISTINCT FROM mine
           ORDER BY j.priority DESC, j.run_at, j.id
           LIMIT take
           FOR UPDATE SKIP LOCKED);
        take := least(take - cardinality(resumed), room);
        fresh := CASE WHEN take > 0 THEN ARRAY(
          SELECT j.id FROM skiplock.queue j
           WHERE j.status <> 'RUNNING' AND j.run_at IS NOT NULL AND j.task = tname AND j.flow_key = g.fk AND j.rate_key = g.rk
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
          SELECT j.id FROM skiplock.queue j
           WHERE j.status <> 'RUNNING' AND j.run_at IS NOT NULL AND j.task = tname AND j.flow_key = g.fk AND j.rate_key = g.rk
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
