/**
 * Operating on many jobs by a filter (issue 25, docs/operations.md "Bulk operations"). A bulk
 * action walks the matching jobs by keyset on id, in chunks: each chunk is picked by one
 * statement (no lock), then changed by one statement (or a transaction behind the chunk's row
 * locks, for the actions that cascade) that re-checks each job's state, like a person's single
 * action, and the whole filter again: a job that changed since it was picked (claimed, retried by
 * someone else, failed again with another error) is counted as matched and left alone, and loses
 * nothing. No statement holds locks for longer than one chunk.
 */
import { RESTARTABLE_STATUSES } from '../core/state.ts';
import type { JobStatus } from '../core/types.ts';
import { clock, type Clock } from './clock.ts';
import { cancelCtes, descendantsCtes } from './cancel.ts';
import { RETRIED, requeueRetried } from './retry.ts';
import { statement, type Statement } from './sql.ts';
import { fanInCtes, reopenParentStepCtes } from './steps.ts';
import { deleteChunksCte } from './streams.ts';

/** Which jobs: every field given must hold. */
export interface BulkWhereRow {
  task: string | null;
  statuses: readonly JobStatus[] | null;
  /** A substring of last_error (case-sensitive). */
  errorContains: string | null;
  /** ISO instants: created_at < before, created_at >= after. */
  createdBefore: string | null;
  createdAfter: string | null;
  /** The job's concurrency or rate-limit key (flow_key, rate_key). */
  key: string | null;
}

export type BulkAction = 'retry' | 'cancel' | 'restart' | 'delete';

/**
 * The states each action changes (the fence each chunk re-checks). No action's result is one of
 * its own starting states, so the same call sent again finds nothing to change in what the first
 * one changed (issue 30): retry and restart take finished jobs that did not succeed, never a live
 * one (a restarted job is QUEUED: restarting it again would run its steps again).
 */
export const BULK_FROM: Record<BulkAction, readonly JobStatus[]> = {
  retry: ['DEAD', 'CANCELLED'],
  // RUNNING: asked to stop (once), never overwritten.
  cancel: ['QUEUED', 'WAITING', 'RUNNING'],
  restart: RESTARTABLE_STATUSES,
  delete: ['DONE', 'DEAD', 'CANCELLED'],
};

/**
 * The filter as SQL conditions on the job row `alias` (default `j`), with its values pushed onto
 * `values`. Used by the pick and again by each change statement, which re-applies it to the rows
 * as they are when it changes them. Null (no filter): no condition.
 */
export function bulkWhereSql(w: BulkWhereRow | null | undefined, values: unknown[], alias = 'j'): string[] {
  const where: string[] = [];
  if (!w) return where;
  const j = alias;
  if (w.task !== null) where.push(`${j}.task = $${values.push(w.task)}`);
  if (w.statuses !== null) where.push(`${j}.status = ANY ($${values.push(w.statuses)}::text[])`);
  if (w.errorContains !== null) where.push(`strpos(${j}.last_error, $${values.push(w.errorContains)}) > 0`);
  if (w.createdBefore !== null) where.push(`${j}.created_at < $${values.push(w.createdBefore)}::timestamptz`);
  if (w.createdAfter !== null) where.push(`${j}.created_at >= $${values.push(w.createdAfter)}::timestamptz`);
  if (w.key !== null) {
    const n = values.push(w.key);
    where.push(`(${j}.flow_key = $${n} OR ${j}.rate_key = $${n})`);
  }
  return where;
}
/** ` AND c1 AND c2…` for appending the filter to a WHERE clause, or '' for none. */
const andAll = (conditions: readonly string[]) => conditions.map((c) => ` AND ${c}`).join('');

const LIVE: readonly JobStatus[] = ['QUEUED', 'RUNNING', 'WAITING'];
const FINISHED: readonly JobStatus[] = ['DONE', 'DEAD', 'CANCELLED'];

/**
 * The jobs matching `where` (conditions on alias `j`), as SELECTs of `columns` from the two tables
 * (migration 021): the live jobs from the queue, the finished ones from their records (a live
 * job's record holds a placeholder). A part no status of the filter can match is left out.
 */
function matchingParts(w: BulkWhereRow, where: readonly string[], columns: string, more: readonly string[] = []): string[] {
  const wants = (statuses: readonly JobStatus[]) => w.statuses === null || w.statuses.some((s) => statuses.includes(s));
  const parts: string[] = [];
  if (wants(LIVE)) parts.push(`SELECT ${columns} FROM skiplock.queue j${andWhere([...where, ...more])}`);
  if (wants(FINISHED)) {
    parts.push(`SELECT ${columns} FROM skiplock.job_record j WHERE j.status IN ('DONE', 'DEAD', 'CANCELLED')${andAll([...where, ...more])}`);
  }
  return parts;
}
const andWhere = (conditions: readonly string[]) => (conditions.length > 0 ? ` WHERE ${conditions.join(' AND ')}` : '');

/**
 * The next chunk of matching jobs: ids above `afterId` up to `maxId` (the largest id when the
 * bulk action began: jobs created after it are not chased), ascending, at most `limit`. The live
 * ones by the queue's primary key, the finished ones by the record's (or job_status_id_idx /
 * job_task_id_idx when a status or a task is given).
 */
export function pickJobs(p: { where: BulkWhereRow; afterId: string; maxId: string; limit: number }): Statement {
  const values: unknown[] = [p.afterId, p.maxId];
  const where = ['j.id > $1::bigint', 'j.id <= $2::bigint', ...bulkWhereSql(p.where, values)];
  const n = values.push(p.limit);
  const parts = matchingParts(p.where, where, 'j.id').map((part) => `(${part} ORDER BY j.id LIMIT $${n})`);
  if (parts.length === 0) return statement(`SELECT NULL::text AS id WHERE false`);
  return statement(`SELECT x.id::text AS id FROM (${parts.join(' UNION ALL ')}) x ORDER BY x.id LIMIT $${n}`, values);
}

/** The largest job id now: where a bulk action stops. */
export function maxJobId(): Statement {
  return statement(`SELECT coalesce(max(id), 0)::text AS id FROM skiplock.job_record`);
}

/** For a dry run: how many jobs match, and how many of them the action would change now. */
export function countJobs(p: { where: BulkWhereRow; action: BulkAction; fromStep: string | null }): Statement {
  const values: unknown[] = [BULK_FROM[p.action]];
  const where = bulkWhereSql(p.where, values);
  let changes = `j.status = ANY ($1::text[])`;
  if (p.action === 'cancel') changes += ` AND NOT (j.status = 'RUNNING' AND j.cancel_requested)`;
  if (p.action === 'restart' && p.fromStep !== null)
    changes += ` AND EXISTS (SELECT 1 FROM skiplock.job_step s WHERE s.job_id = j.id AND s.id = $${values.push(p.fromStep)})`;
  const parts = matchingParts(p.where, where, 'j.id, j.status, j.cancel_requested');
  if (parts.length === 0) return statement(`SELECT 0 AS matched, 0 AS changed`);
  return statement(
    `SELECT count(*)::int AS matched, count(*) FILTER (WHERE ${changes})::int AS changed
       FROM (${parts.join(' UNION ALL ')}) j`,
    values,
  );
}

/**
 * DEAD or CANCELLED → QUEUED for these jobs that still match `where` (re-checked on the rows as
 * they are now), as retryJob does each. One row: `changed`.
 */
export function retryJobs(p: { now: Clock; ids: readonly string[]; where?: BulkWhereRow | null }): Statement {
  const values: unknown[] = [clock(p.now), p.ids];
  const filter = andAll(bulkWhereSql(p.where, values));
  return statement(
    `WITH changed AS (
       UPDATE skiplock.job_record j SET ${RETRIED}
        WHERE j.id = ANY ($2::bigint[]) AND j.status IN ('DEAD', 'CANCELLED')${filter}
       RETURNING j.*
     ),
     requeued AS (${requeueRetried('changed')}),
     ${reopenParentStepCtes('changed')}
     SELECT count(*)::int AS changed FROM changed`,
    values,
  );
}

/**
 * A person's cancel (src/store/admin.ts cancelJob) of these jobs: QUEUED / WAITING → CANCELLED,
 * RUNNING → asked to stop (unless it already was), with their descendants. Within one statement a
 * row is updated once, so a job of the chunk that descends from another of the chunk is cancelled
 * as a descendant, and the fan-in reaches only parents outside the chunk and its trees. Sent
 * behind lockJobs of the same ids (the cascade then sees every child a running invoke commits).
 * Only the jobs that still match `where` (re-checked on the rows as they are now) are cancelled
 * themselves; a job whose parent in the chunk no longer matches is not taken as its descendant.
 * One row: `changed` (the chunk's jobs cancelled or asked to stop, descendants not counted).
 */
export function cancelJobs(p: { now: Clock; ids: readonly string[]; where?: BulkWhereRow | null }): Statement {
  const values: unknown[] = [clock(p.now), p.ids];
  const filter = andAll(bulkWhereSql(p.where, values));
  const parentFilter = andAll(bulkWhereSql(p.where, values, 'a'));
  return statement(
    `WITH RECURSIVE ${cancelCtes('changed', `SELECT j.id FROM skiplock.queue j
        WHERE j.id = ANY ($2::bigint[]) AND (j.status IN ('QUEUED', 'WAITING') OR (j.status = 'RUNNING' AND NOT j.cancel_requested))${filter}
          AND NOT EXISTS (SELECT 1 FROM skiplock.queue a WHERE a.id = j.parent_id AND a.id = ANY ($2::bigint[])${parentFilter})`)},
     ${descendantsCtes({
       firstLevel: `SELECT c.id FROM skiplock.job_record c WHERE c.parent_id IN (SELECT id FROM changed) AND c.parent_id IS NOT NULL`,
       stepsOf: `SELECT id FROM changed UNION ALL SELECT id FROM descendants`,
       error: `'cancelled with its parent job (a bulk cancel)'`,
       skip: `SELECT id FROM changed`,
     })},
     fan_source AS (SELECT * FROM changed c WHERE c.parent_id IS NULL OR c.parent_id NOT IN (SELECT id FROM tree))
     , ${fanInCtes('fan_source')}
     SELECT (SELECT count(*)::int FROM changed) + (SELECT count(*)::int FROM descendants d WHERE d.id = ANY ($2::bigint[])) AS changed`,
    values,
  );
}

/**
 * Deletes these jobs if finished (DONE, DEAD, CANCELLED) and still matching `where` (re-checked
 * on the rows as they are now); their steps and their streams' chunks go with them. One row: `changed`.
 */
export function deleteJobs(p: { ids: readonly string[]; where?: BulkWhereRow | null }): Statement {
  const values: unknown[] = [p.ids];
  const filter = andAll(bulkWhereSql(p.where, values));
  return statement(
    `WITH gone AS (DELETE FROM skiplock.job_record j WHERE j.id = ANY ($1::bigint[]) AND j.status IN ('DONE', 'DEAD', 'CANCELLED')${filter} RETURNING j.id),
     ${deleteChunksCte('gone')}
     SELECT count(*)::int AS changed FROM gone`,
    values,
  );
}
