/**
 * Statements for operating the queue by hand (the HTTP API and the CLI): list, cancel, retry,
 * counts. Same rules as claim.ts: pure builders, one statement per state change, and `$1` is the
 * clock wherever time is read.
 */
import { MS, NOW, clock, type Clock } from './clock.ts';
import type { JobStatus } from '../core/types.ts';
import { cancelCtes, descendantsCtes } from './cancel.ts';
import { liveJobColumns, queueFromRecord } from './queue.ts';
import { RETRIED, requeueRetried } from './retry.ts';
import { statement, type Statement } from './sql.ts';
import { fanInCtes, reopenParentStepCtes } from './steps.ts';

export interface ListJobsParams {
  status: JobStatus | null;
  task: string | null;
  /** Keyset cursor: only jobs with a smaller id (older) than this one. */
  beforeId: string | null;
  limit: number;
}

/** The statuses of a live job: it has a queue row (migration 021). */
const LIVE_STATUSES: readonly string[] = ['QUEUED', 'RUNNING', 'WAITING'];

/**
 * Newest first, by id. Paging on `id < beforeId` rather than an offset keeps pages stable while
 * jobs are inserted (new jobs get larger ids, so they never shift an older page).
 * The conditions are composed, not `($n IS NULL OR …)`, so each query can use its index. A live
 * status reads the queue (its rows are the live jobs, its status the truth) joined to the
 * records; a finished one reads the records (job_failed_idx, or newest-first by the
 * primary key for DONE); no status, the view (the record's primary key or job_task_id_idx).
 */
export function listJobs(p: ListJobsParams): Statement {
  const values: unknown[] = [];
  const where: string[] = [];
  // DEAD and CANCELLED records are found by failed_status (job_failed_idx, migration 021).
  if (p.status !== null) where.push(`${p.status === 'DEAD' || p.status === 'CANCELLED' ? 'failed_status' : 'status'} = $${values.push(p.status)}`);
  if (p.task !== null) where.push(`task = $${values.push(p.task)}`);
  if (p.beforeId !== null) where.push(`id < $${values.push(p.beforeId)}::bigint`);
  const page = (from: string) => `SELECT * FROM ${from}
      ${where.length > 0 ? `WHERE ${where.join(' AND ')}` : ''}
      ORDER BY id DESC
      LIMIT $${values.push(p.limit)}`;
  if (p.status === null || !LIVE_STATUSES.includes(p.status)) return statement(page(p.status === null ? 'skiplock.job' : 'skiplock.job_record'), values);
  // The page's records by primary key (`id = ANY`): never a merge join walking the records
  // newer than the page's jobs.
  return statement(
    `WITH q AS MATERIALIZED (${page('skiplock.queue')})
     SELECT ${liveJobColumns('r', 'q')} FROM q JOIN skiplock.job_record r ON r.id = q.id
      WHERE r.id = ANY (ARRAY(SELECT id FROM q))
      ORDER BY q.id DESC`,
    values,
  );
}

/**
 * Runs the CTEs `ctes` changing one job (by `$2`), the last of them `changed` returning the job's
 * row as it is after the change (the view's columns, in its order), and answers in the same
 * statement: that row with `applied = true`, or the row as it is with `applied = false` when the
 * change's state condition did not hold, or no row when the job does not exist. The caller turns
 * these into 200 / 409 / 404.
 */
function answerOne(ctes: string, values: readonly unknown[], recursive = false): Statement {
  return statement(
    `WITH${recursive ? ' RECURSIVE' : ''} ${ctes}
     SELECT true AS applied, changed.* FROM changed
     UNION ALL
     SELECT false AS applied, job.* FROM skiplock.job job
      WHERE job.id = $2::bigint AND NOT EXISTS (SELECT 1 FROM changed)`,
    values,
  );
}

/** A job's row, by id (no row when it does not exist). */
export function getJob(p: { id: string }): Statement {
  return statement(`SELECT * FROM skiplock.job WHERE id = $1::bigint`, [p.id]);
}

/**
 * Takes a job's row locks — its queue row (a live job), then its record — for the transaction
 * that cancels or restarts it (runtime/admin.ts sends this, then cancelJob, in one transaction).
 * A RUNNING job's ctx.invoke holds its queue row's lock while it writes children; cancelJob's
 * cascade reads the children with its statement's snapshot, taken before it waits for the lock,
 * so on its own it would miss the children that invoke commits. Behind this statement, cancelJob
 * starts (and snapshots) once the invoke has committed, and any later invoke waits for the cancel
 * and then finds the job asked to stop. (The queue row first, as every statement that ends a job
 * locks them: src/store/claim.ts.)
 */
export function lockJob(p: { id: string }): Statement {
  return statement(
    `WITH live AS (SELECT q.id FROM skiplock.queue q WHERE q.id = $1::bigint FOR UPDATE)
     SELECT 1 FROM skiplock.job_record r WHERE r.id = $1::bigint AND (SELECT count(*) FROM live) >= 0 FOR UPDATE`,
    [p.id],
  );
}

/**
 * The job row `j` (of the view, as this statement's snapshot reads it: behind lockJob, as it is)
 * after the cancel `c` (cancelCtes) changed it: ended CANCELLED (the record as recordEnd writes it
 * from the queue row: src/store/queue.ts), or asked to stop.
 */
const CANCELLED_ROW = `jsonb_populate_record(j, CASE WHEN c.status = 'CANCELLED'
       THEN jsonb_build_object('status', 'CANCELLED', 'finished_at', ${NOW}, 'pending_children', 0, 'locked_by', NULL, 'locked_until', NULL,
                               'cancel_requested', false, 'wait_woken', false, 'debounce_key', NULL, 'updated_at', ${NOW})
       ELSE jsonb_build_object('cancel_requested', true, 'pending_children', 0, 'updated_at', ${NOW}) END)`;

/**
 * QUEUED or WAITING → CANCELLED; a RUNNING job only gets `cancel_requested`, which its worker sees
 * at the next heartbeat (its handler is aborted and the job lands in CANCELLED) and which the
 * reaper honours if that worker is gone. Setting the flag needs no fence: it asks whoever holds the
 * job. The cancel is src/store/cancel.ts's, as an event's cancelOn and the bulk cancel make it.
 *
 * Durable steps, in the same statement: a job cancelled here (or asked to stop) cancels its
 * descendants (the children it invoked, theirs, …): QUEUED and WAITING ones end CANCELLED, RUNNING
 * ones are asked to stop; the invoke steps that waited on them are marked failed (child
 * CANCELLED) and nobody waits for them any more (pending_children 0). A RUNNING job asked to stop
 * cannot invoke new children (src/store/steps.ts invokeChildren). A cancelled child reaches its
 * own parent (fan-in). Sent behind lockJob (runtime/admin.ts), so the row it answers is read as it is.
 */
export function cancelJob(p: { now: Clock; id: string }): Statement {
  return answerOne(
    `${cancelCtes('cancelled', `SELECT $2::bigint`)},
     ${descendantsCtes({
       firstLevel: `SELECT c.id FROM skiplock.job_record c WHERE c.parent_id IN (SELECT id FROM cancelled) AND c.parent_id IS NOT NULL`,
       stepsOf: `SELECT id FROM cancelled UNION ALL SELECT id FROM descendants`,
       error: `'cancelled with its parent job ' || $2::bigint`,
     })},
     ${fanInCtes('cancelled')},
     changed AS (SELECT x.* FROM skiplock.job j JOIN cancelled c ON c.id = j.id, LATERAL ${CANCELLED_ROW} x WHERE j.id = $2::bigint)`,
    [clock(p.now), p.id],
    true,
  );
}

/**
 * DEAD → QUEUED for many jobs at once (after the bug that killed them is fixed): at most `limit`,
 * oldest first, of one task or of all; like retryJob otherwise. Returns how many.
 */
export function retryDeadJobs(p: { now: Clock; task: string | null; limit: number }): Statement {
  return statement(
    `WITH picked AS (
       SELECT id FROM skiplock.job_record
        WHERE failed_status = 'DEAD' AND ($2::text IS NULL OR task = $2::text)
        ORDER BY id
        LIMIT $3
        FOR UPDATE SKIP LOCKED
     ),
     retried AS (
       UPDATE skiplock.job_record j SET ${RETRIED}
       FROM picked WHERE j.id = picked.id AND j.status = 'DEAD'
       RETURNING j.*
     ),
     requeued AS (${requeueRetried('retried')}),
     ${reopenParentStepCtes('retried')}
     SELECT count(*)::int AS retried FROM retried`,
    [clock(p.now), p.task, p.limit],
  );
}

/**
 * DEAD or CANCELLED → QUEUED, due now, with a fresh set of attempts (last_error is kept): the
 * record revived and a queue row inserted from it (src/store/retry.ts). A WAITING job is not
 * retried (409): it is not finished. A retried child of a WAITING parent is waited for again
 * (src/store/steps.ts reopenParentStepCtes).
 */
export function retryJob(p: { now: Clock; id: string }): Statement {
  return answerOne(
    `changed AS (
       UPDATE skiplock.job_record j SET ${RETRIED}
        WHERE j.id = $2::bigint AND j.status IN ('DEAD', 'CANCELLED')
       RETURNING j.*
     ),
     requeued AS (${requeueRetried('changed')}),
     ${reopenParentStepCtes('changed')}`,
    [clock(p.now), p.id],
  );
}

/** stats() counts at most this many DONE jobs; beyond, their number is estimated (jobStats). */
export const STATS_DONE_EXACT_LIMIT = 10_000;

/**
 * Counts by status and task without reading the DONE rows that are most of the records, and how
 * long the longest-waiting due QUEUED job has waited past its run_at (0 when none is due). One row:
 *   - `live` as [[status, task, n, scheduled], …]: every job not DONE, counted exactly: the live
 *     ones from the queue (its rows are the live jobs), `scheduled` being the QUEUED ones not due
 *     yet; DEAD and CANCELLED from the records, through the partial index job_failed_idx
 *     (failed_status, migration 021);
 *   - `done_sample` as [[task, n], …]: the newest DONE jobs, at most $2 + 1 of them (newest
 *     first by the record's primary key), and `done_sampled`, how many;
 *   - `done_estimate`: when more than $2 are DONE, the planner's estimate of the records (reltuples
 *     per page × the pages it has now, as the planner scales it) less the jobs not DONE (a live
 *     job has a record too); null when the records were never analyzed (then `done_exact`, a
 *     count, is the fallback).
 * The lag reads job_claim_idx: QUEUED jobs, and WAITING ones whose wake instant has come.
 */
export function jobStats(p: { now: Clock; doneLimit?: number }): Statement {
  return statement(
    `WITH live AS (
       SELECT status, task, count(*)::int AS n,
              count(*) FILTER (WHERE status = 'QUEUED' AND run_at > ${NOW})::int AS scheduled
         FROM skiplock.queue GROUP BY status, task
       UNION ALL
       SELECT failed_status, task, count(*)::int, 0 FROM skiplock.job_record
        WHERE failed_status IN ('DEAD', 'CANCELLED') GROUP BY failed_status, task
     ),
     done_sample AS (SELECT task FROM skiplock.job_record WHERE status = 'DONE' ORDER BY id DESC LIMIT $2::int + 1),
     sampled AS (SELECT count(*)::int AS n FROM done_sample),
     estimate AS (
       SELECT CASE WHEN c.reltuples > 0 AND c.relpages > 0
                   THEN greatest((SELECT n FROM sampled),
                                 round(c.reltuples / c.relpages * (pg_relation_size(c.oid) / current_setting('block_size')::float8))
                                   - (SELECT coalesce(sum(n), 0) FROM live))::bigint
              END AS rows
         FROM pg_class c WHERE c.oid = 'skiplock.job_record'::regclass
     )
     SELECT
       (SELECT coalesce(jsonb_agg(jsonb_build_array(status, task, n, scheduled)), '[]'::jsonb) FROM live) AS live,
       (SELECT coalesce(jsonb_agg(jsonb_build_array(task, n)), '[]'::jsonb)
          FROM (SELECT task, count(*)::int AS n FROM done_sample GROUP BY task) t) AS done_sample,
       (SELECT n FROM sampled) AS done_sampled,
       CASE WHEN (SELECT n FROM sampled) > $2::int THEN (SELECT rows FROM estimate) END AS done_estimate,
       CASE WHEN (SELECT n FROM sampled) > $2::int AND (SELECT rows FROM estimate) IS NULL
            THEN (SELECT count(*) FROM skiplock.job_record WHERE status = 'DONE') END AS done_exact,
       (SELECT coalesce(greatest(0, extract(epoch FROM ${NOW} - least(
          -- The plain claim's index (migration 022), and the fair jobs' (023): a few probes.
          (SELECT min(run_at) FROM skiplock.queue WHERE status <> 'RUNNING' AND run_at IS NOT NULL AND fair_key IS NULL AND batch_key IS NULL AND run_at <= ${NOW}),
          (SELECT f FROM skiplock.next_fair_at(NULL, 2147483647) AS f WHERE f <= ${NOW}))) * 1000), 0)::float8) AS oldest_queued_age_ms`,
    [clock(p.now), p.doneLimit ?? STATS_DONE_EXACT_LIMIT],
  );
}

/** DEAD jobs by task, from the records' index of failed jobs (never the DONE rows that are most of them). */
export function deadJobsByTask(): Statement {
  return statement(`SELECT task, count(*)::int AS dead FROM skiplock.job_record WHERE failed_status = 'DEAD' GROUP BY task ORDER BY task COLLATE "C"`);
}

/** The health check: answers when the database does. */
export function ping(): Statement {
  return statement(`SELECT 1 AS ok`);
}

/** The clock itself: what ages shown to people are measured against (never the JS clock). */
export function currentTime(p: { now: Clock }): Statement {
  return statement(`SELECT ${NOW} AS now`, [clock(p.now)]);
}

/**
 * A QUEUED job's new time, payload or priority (each null: kept), in one statement fenced on
 * QUEUED: a claim that got there first leaves it RUNNING, and the answer says not applied (409).
 * `run_at` absolute, or `delay_ms` after now, or neither (kept). The queue row is locked first
 * (its latest version: the fence is judged on it); its live columns change there (the row
 * replaced: see `gone`), a new payload in the record.
 */
export function rescheduleJob(p: {
  now: Clock;
  id: string;
  runAt: string | null;
  delayMs: number | null;
  payload: unknown;
  hasPayload: boolean;
  /** With a new payload: its flow-control keys (src/runtime/flow/keys.ts). */
  flow_key?: string | null;
  rate_key?: string | null;
  fair_key?: string | null;
  batch_key?: string | null;
  priority: number | null;
}): Statement {
  return answerOne(
    `target AS MATERIALIZED (
       SELECT q.id FROM skiplock.queue q
        -- A QUEUED job, or a WAITING one with a wake instant (a sleep, a timed wait): its time moves.
        WHERE q.id = $2::bigint AND (q.status = 'QUEUED' OR (q.status = 'WAITING' AND q.run_at IS NOT NULL))
          -- Recorded steps were computed from the old payload: a new one would not match them.
          AND (NOT $6::boolean OR q.step_count = 0)
        FOR UPDATE OF q
     ),
     -- The queue row is replaced (deleted, and inserted again with the same id), not updated: a
     -- claim whose snapshot is older than this statement then skips the row it would lock (deleted)
     -- and does not see the new one, so it never runs the new time with the old payload, which it
     -- reads from the record as its snapshot has it.
     gone AS (DELETE FROM skiplock.queue j WHERE j.id = ANY (ARRAY(SELECT id FROM target)) RETURNING j.*),
     moved AS (
       ${queueFromRecord('gone', {
         run_at: `coalesce($3::timestamptz, ${NOW} + $4::bigint ${MS}, x.run_at)`,
         flow_key: `CASE WHEN $6::boolean THEN $8 ELSE x.flow_key END`,
         rate_key: `CASE WHEN $6::boolean THEN $9 ELSE x.rate_key END`,
         fair_key: `CASE WHEN $6::boolean THEN $10 ELSE x.fair_key END`,
         batch_key: `CASE WHEN $6::boolean THEN $11 ELSE x.batch_key END`,
         priority: `coalesce($7::smallint, x.priority)`,
         updated_at: NOW,
         ...Object.fromEntries(['locked_by', 'locked_until', 'debounce_key', 'cancel_requested', 'wait_woken'].map((c) => [c, `x.${c}`])),
       })}
       RETURNING *
     ),
     repaid AS (
       UPDATE skiplock.job_record r SET payload = $5::jsonb, fair_key = $10, batch_key = $11
        WHERE $6::boolean AND r.id = ANY (ARRAY(SELECT id FROM target))
       RETURNING r.*
     ),
     rec AS (
       SELECT * FROM repaid
       UNION ALL
       SELECT r.* FROM skiplock.job_record r WHERE r.id = ANY (ARRAY(SELECT id FROM target)) AND NOT $6::boolean
     ),
     changed AS (SELECT ${liveJobColumns('r', 'm')} FROM moved m JOIN rec r ON r.id = m.id)`,
    [clock(p.now), p.id, p.runAt, p.delayMs, p.hasPayload ? JSON.stringify(p.payload) : null, p.hasPayload, p.priority, p.flow_key ?? null, p.rate_key ?? null, p.fair_key ?? null, p.batch_key ?? null],
  );
}

/**
 * Pauses a task (idempotent): no tick claims its jobs until it is resumed. Returns the row — none
 * when the task is not `known` (the caller's own tasks) and no deployment registered it
 * (skiplock.registered_task, migration 018): a name no deployment runs is not paused.
 */
export function pauseTask(p: { now: Clock; name: string; known: boolean }): Statement {
  return statement(
    `INSERT INTO skiplock.paused_task AS t (name, paused_at)
     SELECT $2, ${NOW} WHERE $3::boolean OR EXISTS (SELECT 1 FROM skiplock.registered_task r WHERE r.task = $2)
     ON CONFLICT (name) DO UPDATE SET paused_at = t.paused_at
     RETURNING t.name, t.paused_at`,
    [clock(p.now), p.name, p.known],
  );
}

/** Resumes a task (idempotent; any name, so that a row paused before pauseTask checked names can be cleared); returns a row when it was paused. */
export function resumeTask(p: { name: string }): Statement {
  return statement(`DELETE FROM skiplock.paused_task WHERE name = $1 RETURNING name`, [p.name]);
}

/**
 * Every task with jobs or paused (or only `task`), in one row each: its counts by status as [[status, n], …]
 * (`counts`), the paused instant (null: active), and how many of its QUEUED jobs wait on a
 * debounce (`debounced`).
 */
export function taskOverview(p: { task: string | null } = { task: null }): Statement {
  return statement(
    `WITH by_status AS (
       -- Live jobs from the queue; finished ones from the records (a live job's record is a placeholder).
       SELECT task, status, count(*)::int AS n,
              count(*) FILTER (WHERE status = 'QUEUED' AND debounce_key IS NOT NULL)::int AS d
         FROM skiplock.queue WHERE ($1::text IS NULL OR task = $1::text) GROUP BY task, status
       UNION ALL
       SELECT task, status, count(*)::int, 0
         FROM skiplock.job_record WHERE status IN ('DONE', 'DEAD', 'CANCELLED') AND ($1::text IS NULL OR task = $1::text)
        GROUP BY task, status
     ),
     counts AS (
       SELECT task, jsonb_agg(jsonb_build_array(status, n)) AS counts, sum(d)::int AS debounced FROM by_status GROUP BY task
     )
     SELECT coalesce(c.task, p.name) AS task, coalesce(c.counts, '[]'::jsonb) AS counts,
            coalesce(c.debounced, 0) AS debounced, p.paused_at
       FROM counts c FULL JOIN (SELECT * FROM skiplock.paused_task WHERE $1::text IS NULL OR name = $1::text) p ON p.name = c.task
      ORDER BY coalesce(c.task, p.name) COLLATE "C"`,
    [p.task],
  );
}

/** Why a QUEUED job waits, beyond its run_at: its task paused, a debounce key still pushing it back. */
export function jobWaitFacts(p: { id: string }): Statement {
  return statement(
    `SELECT j.debounce_key, EXISTS (SELECT 1 FROM skiplock.paused_task t WHERE t.name = j.task) AS task_paused
       FROM skiplock.job j WHERE j.id = $1::bigint`,
    [p.id],
  );
}

/**
 * For /metrics: the paused tasks, and the QUEUED jobs waiting on a debounce by task. Cheap
 * whatever the table's size: the paused_task rows, and job_debounce_idx (only debounced QUEUED
 * jobs are in it). One row per task: `paused` and `debounced`.
 */
export function flowControlGauges(): Statement {
  return statement(
    `SELECT coalesce(d.task, p.name) AS task, p.name IS NOT NULL AS paused, coalesce(d.n, 0)::int AS debounced
       FROM (SELECT task, count(*) AS n FROM skiplock.queue WHERE status = 'QUEUED' AND debounce_key IS NOT NULL GROUP BY task) d
       FULL JOIN skiplock.paused_task p ON p.name = d.task`,
  );
}
