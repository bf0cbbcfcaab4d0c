/**
 * The CLI's commands on jobs: `job <id>`, `retry <id>`, `cancel <id>`, `restart <id>`, and `jobs`
 * in its three forms — the list (filters and a cursor), one job (`jobs <id>`, `jobs <action> <id>`)
 * and bulk (`jobs <action> --filters…`, skiplock.bulk). Each prints what the HTTP API answers.
 */
import { SkiplockError } from '../core/errors.ts';
import { JOB_STATUSES, type JobStatus } from '../core/types.ts';
import type { Skiplock } from '../runtime/skiplock.ts';
import { jobToJson } from '../store/rows.ts';
import { integer, UsageError, type Values } from './args.ts';

const BULK_ACTIONS = ['retry', 'cancel', 'restart', 'delete'] as const;
const FILTERS = ['task', 'status', 'error-contains', 'created-before', 'created-after', 'key', 'dry-run'] as const;

/** `jobs <id>`, `jobs <action> <id>` (one job) or `jobs <action> --filters…` (bulk). */
export async function jobsWith(skiplock: Skiplock, args: string[], values: Values): Promise<unknown> {
  const [action, ...ids] = args as [string, ...string[]];
  if (args.length === 1 && /^\d+$/.test(action)) return showJob(skiplock, action);
  if (!(BULK_ACTIONS as readonly string[]).includes(action))
    throw new UsageError(`jobs takes no argument, a job id, or one of ${BULK_ACTIONS.join(', ')}; got ${JSON.stringify(action)}`);
  if (ids.length === 0) return bulk(skiplock, action as (typeof BULK_ACTIONS)[number], values);
  if (ids.length > 1) throw new UsageError(`jobs ${action} takes one job id at a time, or filters (--task, --status, …)`);
  if (action === 'delete') throw new UsageError('jobs delete works on a filter (--task, --status, …), not on a job id');
  if (FILTERS.some((name) => values[name] !== undefined)) throw new UsageError(`jobs ${action} takes a job id or filters (--task, --status, …), not both`);
  return oneJob(skiplock, action as 'retry' | 'cancel' | 'restart', ids[0]!, values);
}

/** `jobs`: the list, newest first, with filters and a cursor. */
export async function listJobs(skiplock: Skiplock, values: Values): Promise<unknown> {
  const status = values.status?.toUpperCase();
  if (status !== undefined && !(JOB_STATUSES as readonly string[]).includes(status))
    throw new UsageError(`--status must be one of ${JOB_STATUSES.join(', ')}`);
  const page = await skiplock.listJobs({
    ...(status ? { status: status as JobStatus } : {}),
    ...(values.task !== undefined ? { task: values.task } : {}),
    ...(values.limit !== undefined ? { limit: integer(values.limit, '--limit') } : {}),
    ...(values.cursor !== undefined ? { cursor: values.cursor } : {}),
  });
  return { jobs: page.jobs.map(jobToJson), nextCursor: page.nextCursor };
}

/** One job's retry, cancel or restart, as the HTTP API's POST /v1/jobs/:id/<action>. */
export async function oneJob(skiplock: Skiplock, action: 'retry' | 'cancel' | 'restart', id: string, values: Values): Promise<unknown> {
  if (action === 'cancel') {
    const { job, outcome } = await skiplock.cancelJob(id);
    return { job: jobToJson(job), outcome };
  }
  if (action === 'retry') return { job: jobToJson(await skiplock.retryJob(id)) };
  return { job: jobToJson(await skiplock.restartJob(id, { fromStep: values['from-step'] ?? null })) };
}

export async function showJob(skiplock: Skiplock, id: string): Promise<unknown> {
  const job = await skiplock.getJob(id);
  if (!job) throw new SkiplockError('not_found', `no job ${JSON.stringify(id)}`);
  return { job: jobToJson(job) };
}

/** `jobs <action> --filters…`: skiplock.bulk (docs/operations.md, "Bulk operations"). */
async function bulk(skiplock: Skiplock, action: (typeof BULK_ACTIONS)[number], values: Values) {
  const where: Record<string, unknown> = {};
  if (values.task !== undefined) where.task = values.task;
  if (values.status !== undefined) where.status = values.status.split(',').map((s) => s.trim());
  if (values['error-contains'] !== undefined) where.errorContains = values['error-contains'];
  if (values['created-before'] !== undefined) where.createdBefore = values['created-before'];
  if (values['created-after'] !== undefined) where.createdAfter = values['created-after'];
  if (values.key !== undefined) where.key = values.key;
  return skiplock.bulk({
    action,
    where,
    ...(values['dry-run'] ? { dryRun: true } : {}),
    ...(values['from-step'] !== undefined ? { fromStep: values['from-step'] } : {}),
  });
}
