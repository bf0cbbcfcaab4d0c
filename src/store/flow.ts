/**
 * What flow control holds back (issue 14 item 5): the keys at their limit, and why a QUEUED job of
 * a limited task waits. Read-only; the limits come from the deployment's task definitions
 * (src/runtime/flow/keys.ts), as the claim reads them.
 */
import { MS, NOW, clock, type Clock } from './clock.ts';
import { statement, type Statement } from './sql.ts';

/** One limited task as skiplock.claim_limited_jobs reads it (src/runtime/flow/keys.ts builds them). */
export interface FlowLimitRow {
  task: string;
  /** Concurrency per flow_key. */
  limit?: number;
  /** Concurrency over all keys. */
  global?: number;
  /** Starts per period_ms per rate_key. */
  rate?: number;
  period_ms?: number;
}

const LIMITS = `SELECT * FROM jsonb_to_recordset($2::jsonb) AS l(task text, "limit" int, "global" int, rate int, period_ms bigint)`;

/** At most this many keys at their limit are listed (the counts by task cover all of them). */
export const FLOW_KEYS_LISTED = 200;

/**
 * The keys at their limit, one row each (kind 'concurrency' per flow key, 'global' per task,
 * 'rate' per rate key with `opens_at`, when its next start is allowed), with `waiting`: its due
 * QUEUED jobs. Then one row of kind 'waiting' per task: its due QUEUED jobs held back by any
 * limit. Reads the flow indexes only (RUNNING and due QUEUED jobs of limited tasks, recent starts).
 */
export function flowStatus(p: { now: Clock; limits: readonly FlowLimitRow[] }): Statement {
  return statement(
    `WITH l AS MATERIALIZED (${LIMITS}),
     running AS MATERIALIZED (
       SELECT j.task, j.flow_key, count(*)::int AS n FROM skiplock.queue j
        WHERE j.status = 'RUNNING' AND j.flow_key IS NOT NULL AND j.task IN (SELECT task FROM l) GROUP BY 1, 2),
     starts AS MATERIALIZED (
       SELECT s.task, s.rate_key, count(*)::int AS n,
              (array_agg(s.started_at ORDER BY s.started_at DESC))[min(l.rate)] + min(l.period_ms) ${MS} AS opens_at
         FROM skiplock.flow_start s JOIN l ON l.task = s.task
        WHERE l.rate IS NOT NULL AND s.started_at > ${NOW} - l.period_ms ${MS} GROUP BY 1, 2),
     -- resuming: the same attempt goes on (migration 015), no rate limit holds it.
     due AS MATERIALIZED (
       SELECT j.task, j.flow_key, j.rate_key, (j.rate_attempt IS NOT DISTINCT FROM j.attempts + 1) AS resuming, count(*)::int AS n FROM skiplock.queue j
        WHERE j.status <> 'RUNNING' AND j.run_at IS NOT NULL AND j.flow_key IS NOT NULL AND j.run_at <= ${NOW} AND j.task IN (SELECT task FROM l) GROUP BY 1, 2, 3, 4),
     full_keys AS MATERIALIZED (
       SELECT r.task, 'concurrency' AS kind, r.flow_key AS key, r.n AS in_use, l."limit" AS lim, NULL::timestamptz AS opens_at
         FROM running r JOIN l ON l.task = r.task WHERE r.n >= l."limit"
       UNION ALL
       SELECT l.task, 'global', '', sum(r.n)::int, l."global", NULL
         FROM running r JOIN l ON l.task = r.task WHERE l."global" IS NOT NULL GROUP BY l.task, l."global" HAVING sum(r.n) >= l."global"
       UNION ALL
       SELECT s.task, 'rate', s.rate_key, s.n, l.rate, s.opens_at FROM starts s JOIN l ON l.task = s.task WHERE s.n >= l.rate),
     held AS MATERIALIZED (
       SELECT d.*, EXISTS (SELECT 1 FROM full_keys f WHERE f.task = d.task AND (f.kind = 'global'
                      OR (f.kind = 'concurrency' AND f.key = d.flow_key) OR (f.kind = 'rate' AND f.key = d.rate_key AND NOT d.resuming))) AS held
         FROM due d)
     (SELECT f.task, f.kind, f.key, f.in_use, f.lim, f.opens_at,
             (SELECT coalesce(sum(d.n), 0)::int FROM due d WHERE d.task = f.task
                 AND (f.kind = 'global' OR (f.kind = 'concurrency' AND d.flow_key = f.key) OR (f.kind = 'rate' AND d.rate_key = f.key AND NOT d.resuming))) AS waiting
        FROM full_keys f ORDER BY f.task, f.kind, f.key LIMIT ${FLOW_KEYS_LISTED})
     UNION ALL
     SELECT h.task, 'waiting', NULL, NULL, NULL, NULL, sum(h.n)::int FROM held h WHERE h.held GROUP BY h.task
     UNION ALL
     SELECT f.task, 'at_limit:' || f.kind, NULL, count(*)::int, NULL, NULL, NULL FROM full_keys f GROUP BY f.task, f.kind`,
    [clock(p.now), JSON.stringify(p.limits)],
  );
}

/**
 * For one QUEUED job of a limited task: its keys, its limits, and what they hold now (the key's
 * RUNNING jobs, the task's, the key's starts in the window and when the next start is allowed).
 * No row for a job that is not QUEUED or whose task has no limit here.
 */
export function jobFlowWait(p: { now: Clock; id: string; limits: readonly FlowLimitRow[] }): Statement {
  return statement(
    `WITH l AS MATERIALIZED (${LIMITS})
     SELECT j.task, j.flow_key, j.rate_key, j.run_at <= ${NOW} AS due, l."limit", l."global", l.period_ms,
            -- A resume (migration 015) needs no start: no rate limit holds it.
            CASE WHEN j.rate_attempt IS DISTINCT FROM j.attempts + 1 THEN l.rate END AS rate,
            (SELECT count(*)::int FROM skiplock.queue r WHERE r.status = 'RUNNING' AND r.task = j.task AND r.flow_key = j.flow_key) AS key_running,
            (SELECT count(*)::int FROM skiplock.queue r WHERE r.status = 'RUNNING' AND r.task = j.task AND r.flow_key IS NOT NULL) AS task_running,
            (SELECT count(*)::int FROM skiplock.flow_start s WHERE s.task = j.task AND s.rate_key = j.rate_key AND s.started_at > ${NOW} - l.period_ms ${MS}) AS starts,
            (SELECT s.started_at + l.period_ms ${MS} FROM skiplock.flow_start s WHERE s.task = j.task AND s.rate_key = j.rate_key
              ORDER BY s.started_at DESC OFFSET greatest(l.rate, 1) - 1 LIMIT 1) AS opens_at
       FROM skiplock.queue j JOIN l ON l.task = j.task
      WHERE j.id = $3::bigint AND j.status <> 'RUNNING' AND j.flow_key IS NOT NULL`,
    [clock(p.now), JSON.stringify(p.limits), p.id],
  );
}

/**
 * Jobs of limited tasks not running (QUEUED, or WAITING: a sleep) without flow keys: enqueued before their task had a limit, or by a
 * deployment without it. The claim of limited tasks never sees them (they would wait forever), so
 * the tick gives them their keys (setFlowKeys). Walks the QUEUED entries of the claim index
 * (task is one of its columns); run at most once a minute per process.
 */
export function unkeyedLimitedJobs(p: { tasks: readonly string[]; limit: number }): Statement {
  return statement(
    `SELECT q.id::text AS id, q.task, r.payload FROM skiplock.queue q JOIN skiplock.job_record r ON r.id = q.id
      WHERE q.status <> 'RUNNING' AND q.flow_key IS NULL AND q.task = ANY($1::text[]) LIMIT $2`,
    [p.tasks, p.limit],
  );
}

/**
 * Writes the keys unkeyedLimitedJobs' caller computed, to jobs still not running and without keys: their
 * queue rows (what the claim reads; the UPDATE's WHERE is re-checked on the locked row, so a job
 * claimed meanwhile is left alone) and their records (what a revival starts from).
 */
export function setFlowKeys(p: { jobs: readonly { id: string; flow_key: string; rate_key: string }[] }): Statement {
  return statement(
    `WITH k AS MATERIALIZED (SELECT * FROM jsonb_to_recordset($1::jsonb) AS k(id bigint, flow_key text, rate_key text)),
     keyed AS (
       UPDATE skiplock.queue j SET flow_key = k.flow_key, rate_key = k.rate_key
         FROM k WHERE j.id = ANY (ARRAY(SELECT id FROM k)) AND j.id = k.id AND j.status <> 'RUNNING' AND j.flow_key IS NULL
       RETURNING j.id, j.flow_key, j.rate_key
     ),
     recorded AS (
       UPDATE skiplock.job_record r SET flow_key = e.flow_key, rate_key = e.rate_key
         FROM keyed e WHERE r.id = ANY (ARRAY(SELECT id FROM keyed)) AND r.id = e.id
     )
     SELECT id FROM keyed`,
    [JSON.stringify(p.jobs)],
  );
}

/**
 * Deletes recorded starts past their task's rate window: the claim prunes a key's starts when it
 * claims that key again, this catches the keys that are never claimed again.
 */
export function pruneFlowStarts(p: { now: Clock; limits: readonly FlowLimitRow[]; limit: number }): Statement {
  return statement(
    `WITH l AS MATERIALIZED (${LIMITS}),
     doomed AS MATERIALIZED (
       SELECT s.ctid FROM skiplock.flow_start s JOIN l ON l.task = s.task
        WHERE l.rate IS NOT NULL AND s.started_at <= ${NOW} - l.period_ms ${MS}
        LIMIT $3)
     DELETE FROM skiplock.flow_start s WHERE s.ctid IN (SELECT ctid FROM doomed)`,
    [clock(p.now), JSON.stringify(p.limits), p.limit],
  );
}
