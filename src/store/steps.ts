/**
 * Durable steps (migrations/012_durable_steps.sql): the statements that read and write
 * skiplock.job_step. Writes are fenced by the job's locked_by + attempts, as every result is, and
 * each also extends the job's lease (a step write is a heartbeat).
 *
 * The fan-in (fanInCtes) and the reopening of a retried child's step (reopenParentStepCtes) are
 * fragments that every statement ending or retrying a job puts in its own WITH, so a child's end
 * reaches its parent in the same statement.
 */
import { MS, NOW, clock, leaseUntil, type Clock } from './clock.ts';
import type { NewJobRow } from './job-row.ts';
import { QUEUE_INSERT, queueFromRecord, queueRowsFrom } from './queue.ts';
import { preparedStatement, statement, type Statement } from './sql.ts';

/** The steps of these jobs, in the order their handlers reached them. */
export function listJobSteps(p: { jobIds: readonly string[] }): Statement {
  return statement(`SELECT s.* FROM skiplock.job_step s WHERE s.job_id = ANY ($1::bigint[]) ORDER BY s.job_id, s.seq`, [p.jobIds]);
}

/**
 * The steps of jobs just claimed, for their runs (the tick sends it only for claimed jobs whose
 * step_count > 0). Sleeps whose wake time has passed are marked done by the same statement, and
 * event, any-event and callback waits whose timeout has (output null): a fact of the clock, whoever holds the
 * job, so it needs no fence.
 */
export function readStepsForRun(p: { now: Clock; jobIds: readonly string[] }): Statement {
  return statement(
    `WITH woke AS (
       UPDATE skiplock.job_step s SET status = 'done', finished_at = s.wake_at
        WHERE s.job_id = ANY ($2::bigint[]) AND s.wake_at <= ${NOW}
          AND ((s.kind = 'sleep' AND s.status = 'sleeping') OR (s.kind IN ('event', 'callback', 'any-event') AND s.status = 'waiting'))
       RETURNING s.job_id, s.id
     )
     SELECT s.job_id::text AS job_id, s.id, s.seq, s.kind, CASE WHEN w.id IS NULL THEN s.status ELSE 'done' END AS status,
            s.output, s.error, s.attempts, s.started_at, CASE WHEN w.id IS NULL THEN s.finished_at ELSE s.wake_at END AS finished_at,
            s.duration_ms, s.wake_at, s.child_id::text AS child_id, s.child_task, s.child_status,
            s.event_name, s.event_key, s.event_id::text AS event_id, s.event_alternatives
       FROM skiplock.job_step s LEFT JOIN woke w ON w.job_id = s.job_id AND w.id = s.id
      WHERE s.job_id = ANY ($2::bigint[])
      ORDER BY s.job_id, s.seq`,
    [clock(p.now), p.jobIds],
  );
}

/** Who may write a job's steps: the run that holds it (as a result write is fenced). */
export interface StepFence {
  now: Clock;
  jobId: string;
  lockedBy: string;
  attempt: number;
  /** The tick's lease settings: the write extends the lease like a heartbeat. */
  leaseMs: number;
  leaseGraceMs: number;
  /** ctx.patched markers to record with this write (they cost no round trip of their own). */
  markers?: readonly MarkerRow[];
}

/** A ctx.patched marker: its stored id (`patched:<id>`) and its place in the order. */
export interface MarkerRow {
  id: string;
  seq: number;
}

/**
 * The markers a step write carries (none: the statement is unchanged): `count` to add to the
 * step_count bump, and `cte` inserting them (kind patch, done) once the fence held. Their JSON
 * is pushed onto `values`.
 */
export function markerParts(f: StepFence, values: unknown[]): { count: string; cte: string } {
  if (!f.markers?.length) return { count: '', cte: '' };
  const n = values.push(JSON.stringify(f.markers));
  return {
    count: ` + jsonb_array_length($${n}::jsonb)`,
    cte: `,
     marked AS (
       INSERT INTO skiplock.job_step (job_id, id, seq, kind, status, attempts, started_at, finished_at)
       SELECT f.id, m.id, m.seq, 'patch', 'done', 0, ${NOW}, ${NOW} FROM fence f, jsonb_to_recordset($${n}::jsonb) AS m(id text, seq int)
       ON CONFLICT DO NOTHING
     )`,
  };
}

/**
 * `fence AS (...)`: the job's row, still RUNNING under this run's lease, with step_count and
 * pending_children bumped and the lease extended; no row when the lease was lost. To invoke
 * children, also not asked to stop: a cancel cascades to the children a job has, so it must not
 * get new ones. Parameters $1 (clock) to $6; the caller's own start at $7.
 */
function fenceCte(steps: string, children = '0'): string {
  return `fence AS (
       UPDATE skiplock.queue j SET step_count = j.step_count + ${steps}, pending_children = j.pending_children + ${children},
              locked_until = greatest(j.locked_until, ${leaseUntil('$6', '$5')}), updated_at = ${NOW}
        WHERE j.id = $2::bigint AND j.status = 'RUNNING' AND j.locked_by = $3 AND j.attempts = $4
          ${children === '0' ? '' : 'AND NOT j.cancel_requested'}
       RETURNING j.id
     )`;
}
const fenceValues = (f: StepFence) => [clock(f.now), f.jobId, f.lockedBy, f.attempt, f.leaseMs, f.leaseGraceMs];

/**
 * A ctx.step's outcome: done with its output, or failed with its error (attempts + 1 either way),
 * inserted or — a step that failed before — updated. `isNew` bumps the job's step_count. Answers
 * one row, `held`: 1 when written, 0 when the lease was lost (nothing written).
 */
export function writeStep(p: StepFence & {
  id: string;
  seq: number;
  isNew: boolean;
  status: 'done' | 'failed';
  /** JSON text of the output (done), or null. */
  output: string | null;
  error: string | null;
  durationMs: number;
}): Statement {
  const values = [...fenceValues(p), p.id, p.isNew ? 1 : 0, p.seq, p.status, p.output, p.error, Math.min(2_147_483_647, Math.max(0, Math.round(p.durationMs)))];
  const marks = markerParts(p, values);
  return preparedStatement(
    `WITH ${fenceCte(`$8::int${marks.count}`)}${marks.cte},
     written AS (
       INSERT INTO skiplock.job_step AS s (job_id, id, seq, kind, status, output, error, attempts, started_at, finished_at, duration_ms)
       SELECT f.id, $7, $9, 'step', $10, $11::jsonb, $12, 1, ${NOW} - $13::int ${MS}, ${NOW}, $13::int FROM fence f
       ON CONFLICT (job_id, id) DO UPDATE SET status = excluded.status, output = excluded.output, error = excluded.error,
          attempts = s.attempts + 1, started_at = excluded.started_at, finished_at = excluded.finished_at, duration_ms = excluded.duration_ms
       RETURNING 1
     )
     SELECT count(*)::int AS held FROM fence`,
    values,
  );
}

/**
 * A ctx.sleep reached for the first time: its row, waking at `until` (absolute) or `ms` after now.
 * Answers the wake time and the row's status ('done' when already due: a sleep of 0), or no row
 * when the lease was lost.
 */
export function writeSleep(p: StepFence & { id: string; seq: number; until: string | null; ms: number }): Statement {
  const values = [...fenceValues(p), p.id, p.seq, p.until, Math.round(p.ms)];
  const marks = markerParts(p, values);
  return statement(
    `WITH ${fenceCte(`1${marks.count}`)}${marks.cte},
     wake AS (SELECT coalesce($9::timestamptz, ${NOW} + $10::bigint ${MS}) AS at)
     INSERT INTO skiplock.job_step (job_id, id, seq, kind, status, attempts, started_at, finished_at, wake_at)
     SELECT f.id, $7, $8, 'sleep', CASE WHEN w.at <= ${NOW} THEN 'done' ELSE 'sleeping' END, 0, ${NOW},
            CASE WHEN w.at <= ${NOW} THEN ${NOW} END, w.at
       FROM fence f, wake w
     RETURNING wake_at, status`,
    values,
  );
}

/** One child of ctx.invoke: the row an enqueue would insert (prepareEnqueue), and its step. */
export interface InvokeRow {
  step: string;
  seq: number;
  job: NewJobRow;
}

/**
 * The invokes a handler reached together (Promise.all), in one statement: the child jobs (with
 * parent_id and parent_step), their step rows (waiting), and the parent's pending_children and
 * step_count bumped by their number — or nothing at all when the lease was lost or a cancel was
 * asked. Answers one row per child: its id and step.
 */
export function invokeChildren(p: StepFence & { children: readonly InvokeRow[] }): Statement {
  const values: unknown[] = [
    ...fenceValues(p),
    JSON.stringify(p.children.map((c, ord) => ({
      ord, step: c.step, seq: c.seq, task: c.job.task, payload: c.job.payload, priority: c.job.priority, delay_ms: c.job.delay_ms,
      max_attempts: c.job.max_attempts, timeout_ms: c.job.timeout_ms, traceparent: c.job.traceparent ?? null,
      flow_key: c.job.flow_key ?? null, rate_key: c.job.rate_key ?? null, fair_key: c.job.fair_key ?? null, batch_key: c.job.batch_key ?? null,
    }))),
    p.children.length,
  ];
  const marks = markerParts(p, values);
  return statement(
    `WITH ${fenceCte(`$8::int${marks.count}`, '$8::int')}${marks.cte},
     input AS MATERIALIZED (
       SELECT * FROM jsonb_to_recordset($7::jsonb) AS i(
         ord int, step text, seq int, task text, payload jsonb, priority smallint, delay_ms bigint, max_attempts int, timeout_ms int,
         traceparent text, flow_key text, rate_key text, fair_key text, batch_key text, cancel_on text[])
     ),
     children AS (
       INSERT INTO skiplock.job_record AS j (task, payload, priority, run_at, max_attempts, timeout_ms, flow_key, rate_key, fair_key, batch_key, cancel_on,
                                      created_at, updated_at, traceparent, parent_id, parent_step)
       SELECT i.task, i.payload, i.priority, ${NOW} + i.delay_ms ${MS}, i.max_attempts, i.timeout_ms, i.flow_key, i.rate_key, i.fair_key, i.batch_key, i.cancel_on,
              ${NOW}, ${NOW}, i.traceparent, f.id, i.step
         FROM input i CROSS JOIN fence f ORDER BY i.ord
       RETURNING j.*
     ),
     live AS (
       ${QUEUE_INSERT}
       ${queueRowsFrom('children')}
     ),
     steps AS (
       INSERT INTO skiplock.job_step (job_id, id, seq, kind, status, attempts, started_at, child_id, child_task)
       SELECT c.parent_id, c.parent_step, i.seq, 'invoke', 'waiting', 0, ${NOW}, c.id, c.task
         FROM children c JOIN input i ON i.step = c.parent_step
     )
     SELECT c.id::text AS id, c.parent_step AS step FROM children c`,
    values,
  );
}

/**
 * The fan-in, as CTEs for the WITH of a statement that ends jobs (the result write, the reaper,
 * the release of unseen claims, a person's cancel). `ended` names a CTE of that statement that
 * returns the jobs it changed, with their new status, result, last_error, parent_id and
 * parent_step; those that ended (DONE, DEAD, CANCELLED) with a parent reach it here:
 *   - the parent's invoke step (still waiting) records the child's result or error, and the
 *     parent's pending_children goes down; the parent WAITING goes QUEUED, due now, when none is
 *     left — by the counter (the parent's row lock orders concurrent ends: one of them sees 0),
 *     or when no other invoke step of it is still waiting (a fallback only: it reads the steps
 *     with the statement's snapshot, so two children ending at once each see the other waiting;
 *     the counter must be right, hence the rule below);
 *   - a child retried by a person after its parent went DEAD of it (last_error is this child's
 *     ChildJobError): when it ends again, the step records it again, and the DEAD parent goes
 *     QUEUED (attempts reset, as a person's retry does) when the child is now DONE. A QUEUED
 *     parent (retried by a person too) gets the new outcome for its next run. A RUNNING, DONE or
 *     CANCELLED parent, or one that caught the error, is left as it is (a person's retry of a
 *     parent picks up children that have since succeeded: refreshedStepCte).
 * Inside one statement a row can only be updated once: the caller never ends a job and updates
 * its parent otherwise in the same statement (the tick writes a child's result in the next batch
 * and does not claim its parent with it; the reaper and the give-back leave the parent for their
 * next pass).
 * Costs nothing measurable when no ended job has a parent (empty CTEs).
 */
export function fanInCtes(ended: string): string {
  const stepSet = childEndSet('e', NOW);
  return `fan_ended AS MATERIALIZED (
       SELECT e.id, e.status, e.result, e.last_error, e.parent_id, e.parent_step FROM ${ended} e
        WHERE e.parent_id IS NOT NULL AND e.status IN ('DONE', 'DEAD', 'CANCELLED')
     ),
     fan_waiting AS (
       UPDATE skiplock.job_step s SET ${stepSet}
         FROM fan_ended e
        WHERE s.job_id = e.parent_id AND s.id = e.parent_step AND s.child_id = e.id AND s.status = 'waiting'
       RETURNING s.job_id
     ),
     fan_again AS (
       UPDATE skiplock.job_step s SET ${stepSet}
         FROM fan_ended e JOIN skiplock.job p ON p.id = e.parent_id
        WHERE s.job_id = e.parent_id AND s.id = e.parent_step AND s.child_id = e.id AND s.status = 'failed' AND p.status IN ('DEAD', 'QUEUED')
          AND ${diedOf('p', 'e.id')}
       RETURNING s.job_id, s.status
     ),
     fan_counts AS MATERIALIZED (
       SELECT x.job_id, count(*) FILTER (WHERE x.w)::int AS waiting, count(*) FILTER (WHERE NOT x.w)::int AS revived
         FROM (SELECT job_id, true AS w FROM fan_waiting UNION ALL SELECT job_id, false FROM fan_again WHERE status = 'done') x
        GROUP BY x.job_id
     ),
     -- A live parent (in the queue).
     fan_parents AS (
       UPDATE skiplock.queue p SET
         pending_children = greatest(p.pending_children - n.waiting, 0),
         status = CASE WHEN ${PARENT_WAKES} THEN 'QUEUED' ELSE p.status END,
         -- Only a parent that wakes is due: a WAITING job with a run_at is one the claim takes.
         run_at = CASE WHEN ${PARENT_WAKES} THEN ${NOW} ELSE p.run_at END,
         updated_at = ${NOW}
       FROM fan_counts n
      WHERE p.id = n.job_id
     ),
     -- A DEAD parent given its child's success: live again, as a person's retry makes it.
     fan_revived AS (
       UPDATE skiplock.job_record p SET status = 'QUEUED', failed_status = NULL, failed_at = NULL, finished_at = NULL, updated_at = ${NOW},
              pending_children = greatest(p.pending_children - n.waiting, 0)
         FROM fan_counts n
        WHERE p.id = n.job_id AND p.status = 'DEAD' AND n.revived > 0
       RETURNING p.*
     ),
     fan_revived_live AS (
       ${queueFromRecord('fan_revived', { status: `'QUEUED'`, attempts: '0', rate_attempt: 'NULL', run_at: NOW })}
     )`;
}

/** In the fan-in: the WAITING parent `p` wakes, its last child (by the counter, or by its steps) ended. */
const PARENT_WAKES = `(p.status = 'WAITING' AND n.waiting > 0 AND (p.pending_children - n.waiting <= 0 OR NOT EXISTS (
                          SELECT 1 FROM skiplock.job_step o WHERE o.job_id = p.id AND o.status = 'waiting'
                             AND NOT EXISTS (SELECT 1 FROM fan_ended e WHERE e.id = o.child_id))))`;

/**
 * The SET of an invoke step (alias s) recording how its child (alias `child`: status, result,
 * last_error) ended, at `endedAt`.
 */
function childEndSet(child: string, endedAt: string): string {
  return `status = CASE WHEN ${child}.status = 'DONE' THEN 'done' ELSE 'failed' END,
         output = CASE WHEN ${child}.status = 'DONE' THEN ${child}.result END,
         error = CASE WHEN ${child}.status = 'DONE' THEN NULL ELSE coalesce(${child}.last_error, 'the child job was ' || lower(${child}.status)) END,
         child_status = ${child}.status, finished_at = ${endedAt},
         duration_ms = least(greatest(round(extract(epoch FROM ${endedAt} - s.started_at) * 1000), 0), 2147483647)::int`;
}

/**
 * The parent (alias) went DEAD of this child's ChildJobError (src/core/errors.ts: its last_error
 * is `ChildJobError: child job <id> (…`), rather than catching it and going on: only such a
 * parent may be given the child's later success.
 */
function diedOf(parent: string, childId: string): string {
  return `${parent}.last_error LIKE 'ChildJobError: child job ' || ${childId} || ' (%'`;
}

/**
 * For a person's retry of a parent that died of a child: its failed invoke step, when that child
 * has since ended DONE (a person retried the child, and it succeeded while the parent was
 * RUNNING, so that end could not reach it), takes the child's result, so the retried parent goes
 * on instead of failing again. (A retry keeps last_error; `skiplock.job` here is the row before it.)
 */
function refreshedStepCte(retried: string, keptOnly: boolean): string {
  return `refreshed AS (
       UPDATE skiplock.job_step s SET ${childEndSet('c', 'c.finished_at')}
         FROM ${retried} r JOIN skiplock.job p ON p.id = r.id JOIN skiplock.job c ON c.parent_id = r.id
        WHERE c.parent_id IS NOT NULL AND s.job_id = r.id AND s.id = c.parent_step AND s.child_id = c.id
          AND s.kind = 'invoke' AND s.status = 'failed' AND c.status = 'DONE' AND ${diedOf('p', 'c.id')}${keptOnly ? `
          AND s.seq < r.from_seq` : ''}
     )`;
}

/**
 * For a person's retry: `retried` names a CTE returning the retried jobs (id, parent_id,
 * parent_step). A retried child whose parent is WAITING (for its other children) has its invoke
 * step set back to waiting and counted in pending_children again, so the parent waits for this
 * child's new end instead of waking to its old failure. (A parent in another state keeps the
 * failed step; the child's next end still reaches it: see fanInCtes.) `keptOnly`, for a restart
 * (src/store/restart.ts): `retried` also returns `from_seq`, and only the steps before it are
 * refreshed (the same statement deletes the others).
 */
export function reopenParentStepCtes(retried: string, options: { keptOnly?: boolean } = {}): string {
  return `${refreshedStepCte(retried, options.keptOnly ?? false)},
     reopened AS (
       UPDATE skiplock.job_step s SET status = 'waiting', output = NULL, error = NULL, child_status = NULL, finished_at = NULL, duration_ms = NULL
         FROM ${retried} r JOIN skiplock.job p ON p.id = r.parent_id
        WHERE r.parent_id IS NOT NULL AND s.job_id = r.parent_id AND s.id = r.parent_step AND s.child_id = r.id
          AND s.status = 'failed' AND p.status = 'WAITING'
       RETURNING s.job_id
     ),
     reopened_parents AS (
       UPDATE skiplock.queue p SET pending_children = p.pending_children + n.n, updated_at = ${NOW}
         FROM (SELECT job_id, count(*)::int AS n FROM reopened GROUP BY job_id) n
        WHERE p.id = n.job_id
     )`;
}

/** The jobs to replay: with recorded steps, of these tasks and states, newest first. */
export function replayCandidates(p: { tasks: readonly string[]; ids: readonly string[] | null; statuses: readonly string[]; limit: number }): Statement {
  return statement(
    `SELECT j.* FROM skiplock.job j
      WHERE j.step_count > 0 AND j.task = ANY ($1::text[]) AND j.status = ANY ($2::text[]) AND ($3::bigint[] IS NULL OR j.id = ANY ($3::bigint[]))
      ORDER BY j.id DESC LIMIT $4`,
    [p.tasks, p.statuses, p.ids, p.limit],
  );
}
