-- The claim's candidate rows, in a function only so that it can carry planner settings.
-- A queue's statistics are stale by nature: after a burst of enqueues, until autovacuum analyzes
-- the table, the planner believes few rows are QUEUED and picks a bitmap scan + sort of every
-- QUEUED row for each claim (≈ 0.6 s per claim at a 1M burst). With sorts and bitmap scans off for
-- this one query, the ordered scan of job_claim_idx is its only plan, whatever the statistics say.
-- VOLATILE (it locks rows); not inlined (a function with SET clauses never is). ROWS 100: the
-- planner's guess for a set-returning function is 1,000 rows, which made the claiming UPDATE
-- hash-join a sequential scan of the whole table instead of probing the primary key.
CREATE FUNCTION skiplock.claimable_jobs(lim int, at timestamptz, budget_ms int, task_names text[]) RETURNS SETOF bigint
  LANGUAGE sql VOLATILE ROWS 100
  SET enable_sort = off
  SET enable_bitmapscan = off
AS $$
  SELECT id FROM skiplock.job
   WHERE status = 'QUEUED' AND run_at <= at AND timeout_ms <= budget_ms AND attempts < max_attempts
     AND task = ANY(task_names)
   ORDER BY priority DESC, run_at, id
   LIMIT lim
   FOR UPDATE SKIP LOCKED
$$;
