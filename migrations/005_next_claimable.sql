-- When the next job this deployment could claim becomes due: what a self-scheduling ticker (the
-- Cloudflare Durable Object alarm) asks before it sleeps. Like claimable_jobs, a function only so
-- that it can carry planner settings: with the statistics a burst of enqueues leaves behind, the
-- planner bitmap-scans every QUEUED row (0.3 s at a 1M backlog) instead of reading the claim
-- index's first entry per priority (0.2 ms).
--
-- The priorities present are walked by a recursive skip-scan of job_claim_idx (one probe each);
-- each priority's earliest run_at is the first matching entry of its range.
CREATE FUNCTION skiplock.next_claimable_at(task_names text[], budget_ms int) RETURNS timestamptz
  LANGUAGE sql STABLE
  SET enable_sort = off
  SET enable_bitmapscan = off
AS $$
  WITH RECURSIVE priorities(priority) AS (
    SELECT max(priority) FROM skiplock.job WHERE status = 'QUEUED'
    UNION ALL
    SELECT (SELECT max(j.priority) FROM skiplock.job j WHERE j.status = 'QUEUED' AND j.priority < p.priority)
      FROM priorities p WHERE p.priority IS NOT NULL
  )
  SELECT min((SELECT j.run_at FROM skiplock.job j
               WHERE j.status = 'QUEUED' AND j.priority = p.priority
                 AND j.task = ANY(task_names) AND j.attempts < j.max_attempts AND j.timeout_ms <= budget_ms
               ORDER BY j.run_at
               LIMIT 1))
    FROM priorities p WHERE p.priority IS NOT NULL
$$;
