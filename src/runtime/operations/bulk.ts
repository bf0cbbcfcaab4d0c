/**
 * skiplock.bulk: retry, cancel, restart or delete every job a filter matches (docs/operations.md,
 * "Bulk operations"), in chunks of BULK_CHUNK ids by keyset on id (SQL in src/store/bulk.ts).
 * Each chunk is changed like a person's single action on each of its jobs: the state is checked
 * again by the statement that changes it, so a concurrent single retry or cancel, a claim, or the
 * same bulk action run twice never applies twice.
 */
import * as z from 'zod';
import { SkiplockError } from '../../core/errors.ts';
import { unstorableText } from '../../core/json.ts';
import { JOB_STATUSES } from '../../core/types.ts';
import type { Clock } from '../../store/clock.ts';
import { cancelJobs, countJobs, deleteJobs, maxJobId, pickJobs, retryJobs, type BulkAction, type BulkWhereRow } from '../../store/bulk.ts';
import { lockJobs, restartJobs } from '../../store/restart.ts';
import { batchDeadlockSafe, type Sql, type Statement } from '../../store/sql.ts';
import { storableInstant, toIssues } from '../tasks/enqueue.ts';

/** Ids per chunk: each chunk's statement locks at most this many rows, for a few milliseconds. */
export const BULK_CHUNK = 1000;

const text = (max: number) => z.string().min(1).max(max).refine((s) => unstorableText(s) === undefined, 'not storable text');
const status = z.preprocess((value) => (typeof value === 'string' ? value.toUpperCase() : value), z.enum(JOB_STATUSES));

/** Which jobs a bulk action takes: every field given must hold; at least one is required. */
export const bulkWhereSchema = z.strictObject({
  task: text(200).optional(),
  /** One status or several, in any case. */
  status: z.union([status, z.array(status).min(1).max(JOB_STATUSES.length)]).optional(),
  /** A substring of the job's last error (case-sensitive), e.g. `ECONNRESET`. */
  errorContains: text(1000).optional(),
  /** Created before this instant. */
  createdBefore: storableInstant.optional(),
  /** Created at or after this instant. */
  createdAfter: storableInstant.optional(),
  /** The job's concurrency or rate-limit key (a tenant, a user), as the task's key function gave it at enqueue. */
  key: text(255).optional(),
}).refine((w) => Object.values(w).some((v) => v !== undefined), { message: 'give at least one filter (task, status, errorContains, createdBefore, createdAfter, key)' });

export const bulkInputSchema = z.strictObject({
  action: z.enum(['retry', 'cancel', 'restart', 'delete']),
  where: bulkWhereSchema,
  /** Count what matches and what would change; write nothing. Default false. */
  dryRun: z.boolean().optional(),
  /** restart only: the step to restart each job from (a job without it is left alone); omitted: from the top. */
  fromStep: text(200).optional(),
}).refine((b) => b.fromStep === undefined || b.action === 'restart', { message: 'fromStep goes with action restart', path: ['fromStep'] });

export type BulkInput = z.input<typeof bulkInputSchema>;

export interface BulkResult {
  /** Jobs the filter matched (when their chunk was picked). */
  matched: number;
  /**
   * Jobs the action changed: retried, cancelled or asked to stop, restarted, deleted. The rest
   * were in no state for it (a DONE job is not retried; a RUNNING job already asked to stop is
   * not asked again; a restarted job, live again, is not restarted again), or no longer matched
   * the filter when their chunk was changed. Always 0 with dryRun.
   */
  changed: number;
  /** With dryRun only: the jobs the action would change now (nothing was changed). */
  wouldChange?: number;
}

function toWhereRow(w: z.output<typeof bulkWhereSchema>): BulkWhereRow {
  return {
    task: w.task ?? null,
    statuses: w.status === undefined ? null : Array.isArray(w.status) ? w.status : [w.status],
    errorContains: w.errorContains ?? null,
    createdBefore: w.createdBefore === undefined ? null : new Date(w.createdBefore).toISOString(),
    createdAfter: w.createdAfter === undefined ? null : new Date(w.createdAfter).toISOString(),
    key: w.key ?? null,
  };
}

export function createBulk(sql: Sql, now: () => Clock) {
  /** The statements that change one chunk: alone, or behind the chunk's row locks when the action cascades. */
  // Each change statement applies the filter again to the rows as they are when it changes them
  // (issue 30): a job changed since the pick so that it no longer matches is matched, not changed.
  const change = (action: BulkAction, ids: string[], where: BulkWhereRow, fromStep: string | null): Statement[] => {
    switch (action) {
      case 'retry':
        return [retryJobs({ now: now(), ids, where })];
      case 'delete':
        return [deleteJobs({ ids, where })];
      case 'cancel':
        return [lockJobs({ ids }), cancelJobs({ now: now(), ids, where })];
      case 'restart':
        return [lockJobs({ ids }), restartJobs({ now: now(), ids, fromStep, answer: 'count', where })];
    }
  };
  return {
    /**
     * Applies `action` to every job `where` matches, in chunks of 1000 (docs/operations.md, "Bulk
     * operations"); jobs created after the call began are left alone. invalid_request for a bad
     * input (nothing written).
     */
    async bulk(raw: BulkInput): Promise<BulkResult> {
      const parsed = bulkInputSchema.safeParse(raw);
      if (!parsed.success) throw new SkiplockError('invalid_request', 'invalid bulk action', toIssues(parsed.error));
      const { action, dryRun, fromStep = null } = parsed.data;
      const where = toWhereRow(parsed.data.where);
      if (dryRun) {
        const [row] = await sql.query(countJobs({ where, action, fromStep }));
        return { matched: Number(row?.matched ?? 0), changed: 0, wouldChange: Number(row?.changed ?? 0) };
      }
      const [top] = await sql.query(maxJobId());
      const maxId = String(top?.id ?? '0');
      const result: BulkResult = { matched: 0, changed: 0 };
      let afterId = '0';
      for (;;) {
        const ids = (await sql.query(pickJobs({ where, afterId, maxId, limit: BULK_CHUNK }))).map((r) => String(r.id));
        if (ids.length === 0) return result;
        result.matched += ids.length;
        afterId = ids[ids.length - 1]!;
        const answers = await batchDeadlockSafe(sql, change(action, ids, where, fromStep));
        result.changed += Number(answers[answers.length - 1]?.[0]?.changed ?? 0);
        if (ids.length < BULK_CHUNK) return result;
      }
    },
  };
}
