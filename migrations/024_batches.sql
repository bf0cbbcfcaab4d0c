-- Batch handlers (issue 35 item 2; src/runtime/tasks/batch.ts, src/store/batches.ts).
--
-- A batch task's jobs carry their batch key (queue.batch_key, migration 022: '' without
-- `batch.key`); the plain claim and its index leave them alone, and only claim_batch_jobs below
-- takes them, a group (task, batch_key) at a time, when max_size of its jobs are due or its oldest
-- due job has waited max_wait_ms.

-- A group's claimable jobs in order, and the groups themselves (one probe per key: a skip-scan).
CREATE INDEX job_batch_idx ON skiplock.queue (task, batch_key, run_at, id)
  WHERE status <> 'RUNNING' AND run_at IS NOT NULL AND batch_key IS NOT NULL;

-- The groups of these batch tasks (`batches`: [{task, max_size, max_wait_ms}]) that hold a job a
-- claim could take (any run_at), at most 1,000 keys per task, each with `ready_at`: when it may run
-- — its oldest such job's run_at + max_wait_ms, or the run_at of its max_size-th job (the group is
-- full), whichever comes first — and its oldest job's run_at. A group is ready when ready_at <= now;
-- the wake state sleeps until the earliest ready_at. The keys are found by a skip-scan of
-- job_batch_idx (one probe each, never a walk over a key's backlog); a group's two instants read at
-- most max_size of its entries.
CREATE FUNCTION skiplock.batch_groups(budget_ms int, batches jsonb)
  RETURNS TABLE (task text, batch_key text, oldest timestamptz, ready_at timestamptz, max_size int)
  LANGUAGE sql STABLE
AS $$
  WITH RECURSIVE b AS (
    SELECT x.task, x.max_size, x.max_wait_ms FROM jsonb_to_recordset(batches) AS x(task text, max_size int, max_wait_ms bigint)
  ),
  -- (Row comparisons, not "task = b.task": they are job_batch_idx's index condition whatever the
  -- statistics say; the walk ends where the task does.)
  keys(task, k, n) AS (
    SELECT b.task, f.batch_key, 1 FROM b CROSS JOIN LATERAL (
      SELECT j.task, j.batch_key FROM skiplock.queue j
       WHERE j.status <> 'RUNNING' AND j.run_at IS NOT NULL AND j.batch_key IS NOT NULL AND (j.task, j.batch_key) >= (b.task, '')
       ORDER BY j.task, j.batch_key LIMIT 1) f
     WHERE f.task = b.task
    UNION ALL
    SELECT keys.task, f.batch_key, keys.n + 1 FROM keys CROSS JOIN LATERAL (
      SELECT j.task, j.batch_key FROM skiplock.queue j
       WHERE j.status <> 'RUNNING' AND j.run_at IS NOT NULL AND j.batch_key IS NOT NULL AND (j.task, j.batch_key) > (keys.task, keys.k)
       ORDER BY j.task, j.batch_key LIMIT 1) f
     WHERE f.task = keys.task AND keys.n < 1000
  )
  SELECT g.task, g.batch_key, g.oldest, least(g.oldest + g.max_wait_ms * interval '1 millisecond', g.nth), g.max_size
    FROM (
      SELECT k.task, k.k AS batch_key, b.max_size, b.max_wait_ms,
             (SELECT j.run_at FROM skiplock.queue j
               WHERE j.status <> 'RUNNING' AND j.run_at IS NOT NULL AND j.batch_key IS NOT NULL AND j.task = k.task AND j.batch_key = k.k
                 AND j.timeout_ms <= budget_ms AND j.attempts < j.max_attempts
               ORDER BY j.run_at, j.id LIMIT 1) AS oldest,
             (SELECT j.run_at FROM skiplock.queue j
               WHERE j.status <> 'RUNNING' AND j.run_at IS NOT NULL AND j.batch_key IS NOT NULL AND j.task = k.task AND j.batch_key = k.k
                 AND j.timeout_ms <= budget_ms AND j.attempts < j.max_attempts
               ORDER BY j.run_at, j.id OFFSET b.max_size - 1 LIMIT 1) AS nth
        FROM keys k JOIN b ON b.task = k.task
    ) g
   WHERE g.oldest IS NOT NULL
$$;

-- The batch claim: the ready groups (batch_groups), the longest-waiting first (ordered by their
-- oldest job: no group starves), at most `slots` of them; of each, up to max_size of its due jobs,
-- oldest first. Returns each job with its group (the group's first job id): the tick runs a
-- group's jobs as one call. Like the plain claim: SKIP LOCKED, within the budget, attempts left;
-- rows this transaction wrote (the same statement's results) are left alone.
CREATE FUNCTION skiplock.claim_batch_jobs(slots int, at timestamptz, budget_ms int, batches jsonb)
  RETURNS TABLE (job_id bigint, batch_group bigint)
  LANGUAGE plpgsql VOLATILE ROWS 100
AS $$
DECLARE
  g record;
  ids bigint[];
  taken int := 0;
  mine xid := xid(pg_current_xact_id_if_assigned());
BEGIN
  IF slots <= 0 OR jsonb_array_length(batches) = 0 THEN RETURN; END IF;
  FOR g IN SELECT x.* FROM skiplock.batch_groups(budget_ms, batches) x WHERE x.ready_at <= at ORDER BY x.oldest, x.task, x.batch_key LOOP
    ids := ARRAY(
      SELECT j.id FROM skiplock.queue j
       WHERE j.status <> 'RUNNING' AND j.run_at IS NOT NULL AND j.batch_key IS NOT NULL AND j.task = g.task AND j.batch_key = g.batch_key
         AND j.run_at <= at AND j.timeout_ms <= budget_ms AND j.attempts < j.max_attempts
         AND j.xmin IS DISTINCT FROM mine
       ORDER BY j.run_at, j.id
       LIMIT g.max_size
       FOR UPDATE SKIP LOCKED);
    CONTINUE WHEN cardinality(ids) = 0;
    RETURN QUERY SELECT unnest(ids), ids[1];
    taken := taken + 1;
    EXIT WHEN taken >= slots;
  END LOOP;
END
$$;

-- When the first group of these batch tasks becomes ready (null: none holds a job).
CREATE FUNCTION skiplock.next_batch_at(batches jsonb, budget_ms int) RETURNS timestamptz
  LANGUAGE sql STABLE
AS $$
  SELECT min(ready_at) FROM skiplock.batch_groups(budget_ms, batches)
$$;
