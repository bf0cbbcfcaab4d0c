/**
 * Restarting jobs from a step (issue 25, docs/steps.md "Changing a workflow's code"): the steps
 * recorded before `fromStep` are kept, it and the ones after are forgotten, and the job is
 * QUEUED, due now, with fresh attempts. One statement for any number of jobs (a person's single
 * restart, or one chunk of a bulk restart: src/store/bulk.ts), sent behind the jobs' row locks
 * (lockJobs) like a cancel, since it cancels the children of forgotten invokes.
 */
import { RESTARTABLE_STATUSES } from '../core/state.ts';
import { clock, type Clock } from './clock.ts';
import { bulkWhereSql, type BulkWhereRow } from './bulk.ts';
import { descendantsCtes } from './cancel.ts';
import { RETRIED, requeueRetried } from './retry.ts';
import { statement, type Statement } from './sql.ts';
import { reopenParentStepCtes } from './steps.ts';

/** The states a restart applies to, as SQL: RESTARTABLE_STATUSES (src/core/state.ts); the rest is refused (409). */
export const RESTARTABLE = `(${RESTARTABLE_STATUSES.map((s) => `'${s}'`).join(', ')})`;

/**
 * Restarts the jobs `ids` ($2) from the step `fromStep` ($3: a stored step id; null forgets every
 * step). A job without that step is left alone (`step_found` false). What it does, in order:
 *   - the job: QUEUED, due now, attempts 0, no result, not asked to stop; step_count = the steps
 *     kept, pending_children = the kept invoke steps still waiting (their children go on, and
 *     their ends reach it as before);
 *   - the forgotten steps are deleted; the children of forgotten invokes that have not finished,
 *     and their descendants, are cancelled (RUNNING ones asked to stop) — except jobs restarted
 *     by this same statement;
 *   - a restarted child of a WAITING parent is waited for again, as after a retry.
 * `where` (a bulk restart's filter) is applied again to each row as it is when the UPDATE changes
 * it: a job that no longer matches is left alone and loses no step (the steps are deleted only
 * for the jobs this UPDATE changed, in this same statement).
 * `answer: 'rows'` (one job): the job's row with `applied` and `step_found`, or nothing when
 * there is no such job. `answer: 'count'`: one row, `changed`.
 */
export function restartJobs(p: { now: Clock; ids: readonly string[]; fromStep: string | null; answer: 'rows' | 'count'; where?: BulkWhereRow | null }): Statement {
  const values: unknown[] = [clock(p.now), p.ids, p.fromStep];
  const filter = bulkWhereSql(p.where, values).map((c) => ` AND ${c}`).join('');
  const body = `WITH RECURSIVE target AS MATERIALIZED (
       SELECT j.id, CASE WHEN $3::text IS NULL THEN 0
                         ELSE (SELECT s.seq FROM skiplock.job_step s WHERE s.job_id = j.id AND s.id = $3::text) END AS from_seq
         FROM skiplock.job_record j WHERE j.id = ANY ($2::bigint[])
     ),
     kept AS (
       SELECT t.id, count(s.id)::int AS steps, count(s.id) FILTER (WHERE s.kind = 'invoke' AND s.status = 'waiting')::int AS waiting
         FROM target t LEFT JOIN skiplock.job_step s ON s.job_id = t.id AND s.seq < t.from_seq
        WHERE t.from_seq IS NOT NULL
        GROUP BY t.id
     ),
     -- A restartable job is finished (its record holds its state): revived as a retry revives it.
     changed AS (
       UPDATE skiplock.job_record j SET ${RETRIED}, step_count = k.steps, pending_children = k.waiting
         FROM kept k JOIN target t ON t.id = k.id
        WHERE j.id = k.id AND j.status IN ${RESTARTABLE}${filter}
       RETURNING j.*, t.from_seq
     ),
     requeued AS (${requeueRetried('changed')}),
     forgotten AS (
       DELETE FROM skiplock.job_step s USING changed c
        WHERE s.job_id = c.id AND s.seq >= c.from_seq
       RETURNING s.job_id, s.kind, s.child_id
     ),
     ${descendantsCtes({
       firstLevel: `SELECT f.child_id FROM forgotten f WHERE f.kind = 'invoke' AND f.child_id IS NOT NULL`,
       stepsOf: `SELECT id FROM descendants`,
       error: `'cancelled: its parent job was restarted from an earlier step'`,
       skip: `SELECT id FROM changed`,
     })},
     ${reopenParentStepCtes('changed', { keptOnly: true })}`;
  if (p.answer === 'count') return statement(`${body}\n     SELECT count(*)::int AS changed FROM changed`, values);
  return statement(
    `${body}
     SELECT true AS applied, true AS step_found, changed.* FROM changed
     UNION ALL
     SELECT false AS applied, t.from_seq IS NOT NULL AS step_found, job.*, t.from_seq FROM skiplock.job job JOIN target t ON t.id = job.id
      WHERE NOT EXISTS (SELECT 1 FROM changed)`,
    values,
  );
}

/**
 * The row locks of these jobs, in id order, for the transaction that restarts or cancels them:
 * their queue rows (the live ones), then their records, as lockJob (src/store/admin.ts) takes one's.
 */
export function lockJobs(p: { ids: readonly string[] }): Statement {
  return statement(
    `WITH live AS (SELECT q.id FROM skiplock.queue q WHERE q.id = ANY ($1::bigint[]) ORDER BY q.id FOR UPDATE)
     SELECT 1 FROM skiplock.job_record r WHERE r.id = ANY ($1::bigint[]) AND (SELECT count(*) FROM live) >= 0 ORDER BY r.id FOR UPDATE`,
    [p.ids],
  );
}
