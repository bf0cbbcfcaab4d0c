/**
 * Operating the queue by hand: list, cancel, retry, stats, ping. The HTTP API and the CLI call
 * these through the Skiplock facade; all SQL is in src/store/admin.ts. createAdminOperations is
 * the list of the groups: reading jobs (read-jobs.ts), changing one job (here: cancel, retry,
 * reschedule), the queue in numbers (stats.ts), tasks paused and resumed (tasks.ts), and the
 * database's own answers (here: ping, currentTime). The writes here wake nothing themselves: the
 * facade passes those that make due work through its hook (skiplock.ts, dueWorkWrites).
 */
import { checkRange, SkiplockError } from '../../core/errors.ts';
import { unstorableText } from '../../core/json.ts';
import type { Job } from '../../core/types.ts';
import * as z from 'zod';
import { isJobId } from '../../core/job-id.ts';
import { jobKeys, type JobKeys } from '../flow/keys.ts';
import { cancelJob, currentTime, getJob, lockJob, ping, rescheduleJob, retryDeadJobs, retryJob } from '../../store/admin.ts';
import { checkTaskPayload, MAX_DELAY_MS, payloadMessage, storableInstant, toIssues } from '../tasks/enqueue.ts';
import type { SkiplockContext } from '../context.ts';
import type { Clock } from '../../store/clock.ts';
import { mapJob, toBool, toDate } from '../../store/rows.ts';
import { batchDeadlockSafe, type Statement } from '../../store/sql.ts';
import { createJobReads, type JobReads } from './read-jobs.ts';
import { createStatsOperations, type StatsOperations } from './stats.ts';
import { createTaskOperations, type TaskOperations } from './tasks.ts';

// Their old home, still imported from here (test/runtime/admin.test.ts, the dashboard).
export { isJobId } from '../../core/job-id.ts';
export { decodeCursor, encodeCursor } from './read-jobs.ts';

/** Jobs one retryDead call puts back, at most. */
export const RETRY_DEAD_LIMIT = 1000;

export interface RetryDeadOptions {
  /** Only this task's DEAD jobs; all of them when omitted. */
  task?: string;
  /** At most this many, 1 to 1000. Default 1000. */
  limit?: number;
}

export interface CancelResult {
  job: Job;
  /** `cancelled`: it was QUEUED and is CANCELLED now; `requested`: it is RUNNING and was asked to stop. */
  outcome: 'cancelled' | 'requested';
}

/** What rescheduleJob changes; at least one field. */
export const rescheduleInputSchema = z.strictObject({
  /** The new due time (ISO-8601 with offset, or a Date). */
  runAt: storableInstant.optional(),
  /** Due this many ms after now (0: run now). */
  delayMs: z.number().int().min(0).max(MAX_DELAY_MS).optional(),
  /** The new payload, checked against the job's task as at enqueue. */
  payload: z.unknown().optional(),
  priority: z.number().int().min(-32768).max(32767).optional(),
}).refine((input) => input.runAt === undefined || input.delayMs === undefined, { message: 'give runAt or delayMs, not both', path: ['delayMs'] })
  .refine((input) => Object.values(input).some((v) => v !== undefined), { message: 'give at least one of runAt, delayMs, payload, priority' });

export type RescheduleInput = z.input<typeof rescheduleInputSchema>;

export interface JobChanges {
  /** QUEUED → CANCELLED, or asks a RUNNING job to stop; not_found, or conflict once finished. */
  cancelJob(id: string): Promise<CancelResult>;
  /** DEAD or CANCELLED → QUEUED, due now, attempts reset; not_found, or conflict otherwise. */
  retryJob(id: string): Promise<Job>;
  /**
   * DEAD → QUEUED for up to `limit` jobs (default and most 1000), oldest first, of one task or of
   * all; resolves to how many. Call it again until it answers 0. CANCELLED jobs are left alone.
   */
  retryDead(options?: RetryDeadOptions): Promise<number>;
  /**
   * Changes a QUEUED job's due time, payload (validated against its task as at enqueue) or
   * priority, in one statement; not_found, or conflict for a job in any other state (a claim that
   * got there first wins). `{ delayMs: 0 }` is "run now".
   */
  rescheduleJob(id: string, input: RescheduleInput): Promise<Job>;
}

export interface DatabaseChecks {
  /** Resolves when the database answers; rejects otherwise. */
  ping(): Promise<void>;
  /** The database's now (or the injected test clock): ages shown to people are measured from it. */
  currentTime(): Promise<Date>;
}

export interface AdminOperations extends JobReads, JobChanges, StatsOperations, TaskOperations, DatabaseChecks {}

/** What the admin operations are built from. */
export type AdminContext = Pick<SkiplockContext, 'sql' | 'now' | 'registry'>;

export function createAdminOperations(ctx: AdminContext): AdminOperations {
  return {
    ...createJobReads(ctx),
    ...createJobChanges(ctx),
    ...createStatsOperations(ctx),
    ...createTaskOperations(ctx),
    ...createDatabaseChecks(ctx),
  };
}

/** Changing one job (or retrying the dead ones), each in one statement that says whether it applied. */
function createJobChanges(ctx: AdminContext): JobChanges {
  const { sql, now } = ctx;
  return {
    async cancelJob(id) {
      // In one transaction behind the job's row lock, so that the cascade sees every child (lockJob).
      const job = await updateOne(ctx, id, cancelJob, 'cancelled', { lockFirst: true });
      return { job, outcome: job.status === 'CANCELLED' ? 'cancelled' : 'requested' };
    },
    retryJob: (id) => updateOne(ctx, id, retryJob, 'retried (only DEAD or CANCELLED jobs can)'),
    async retryDead(options = {}) {
      const limit = options.limit ?? RETRY_DEAD_LIMIT;
      checkRange('limit', limit, RETRY_DEAD_LIMIT);
      // A task name PostgreSQL cannot store is no job's task.
      if (options.task !== undefined && unstorableText(options.task) !== undefined) return 0;
      const [row] = await sql.query(retryDeadJobs({ now: now(), task: options.task ?? null, limit }));
      return Number(row?.retried ?? 0);
    },
    rescheduleJob: (id, raw) => reschedule(ctx, id, raw),
  };
}

async function reschedule(ctx: AdminContext, id: string, raw: RescheduleInput): Promise<Job> {
  const parsed = rescheduleInputSchema.safeParse(raw);
  if (!parsed.success) throw new SkiplockError('invalid_request', 'invalid reschedule', toIssues(parsed.error));
  const input = parsed.data;
  if (!isJobId(id)) throw notFound(id);
  let payload: unknown = null;
  let keys: Partial<JobKeys> = {};
  if (input.payload !== undefined) {
    // The payload is checked against the job's task, so that task is read first (it never changes).
    const [row] = await ctx.sql.query(getJob({ id }));
    if (!row) throw notFound(id);
    const job = mapJob(row);
    // Steps first: a WAITING job asleep has them, and that is why its payload cannot change.
    if (job.stepCount > 0) throw stepsConflict(id, job.stepCount);
    if (job.status !== 'QUEUED') throw new SkiplockError('conflict', `job ${id} is ${job.status}: only QUEUED jobs can be rescheduled`);
    const task = ctx.registry.get(job.task);
    if (!task) throw new SkiplockError('unknown_task', `task ${JSON.stringify(job.task)} is not registered here: its payload cannot be checked`);
    const checked = checkTaskPayload(task, input.payload, ['payload']);
    if ('issues' in checked) throw new SkiplockError('invalid_payload', payloadMessage(task, checked), checked.issues);
    payload = checked.stored;
    // A new payload may name other keys: computed again, as at enqueue (without a fairness.key,
    // the fairnessKey the enqueue gave is kept: it was not the payload's).
    keys = jobKeys(task, checked.value, ['payload'], task.fairness?.key ? undefined : job.fairnessKey ?? undefined);
  }
  return updateOne(
    ctx,
    id,
    (p) => rescheduleJob({
      ...p,
      runAt: input.runAt === undefined ? null : new Date(input.runAt).toISOString(),
      delayMs: input.delayMs ?? null,
      payload,
      hasPayload: input.payload !== undefined,
      ...keys,
      priority: input.priority ?? null,
    }),
    'rescheduled (only QUEUED jobs can, and WAITING ones with a wake time: a sleep, a timed wait)',
    input.payload === undefined ? {} : { refused: (job) => (job.stepCount > 0 ? stepsConflict(id, job.stepCount) : undefined) },
  );
}

/** Runs one of the single-job updates and sorts its answer into updated / unchanged / missing. */
async function updateOne(
  { sql, now }: AdminContext,
  id: string,
  build: (p: { now: Clock; id: string }) => ReturnType<typeof cancelJob>,
  action: string,
  /** refused: a more precise error for a row the statement left alone. */
  options: { lockFirst?: boolean; refused?: (job: Job) => SkiplockError | undefined } = {},
) {
  if (!isJobId(id)) throw notFound(id);
  const update = build({ now: now(), id });
  const [row] = options.lockFirst ? await lockedThen(sql, id, update) : await sql.query(update);
  if (!row) throw notFound(id);
  const job = mapJob(row);
  if (!toBool(row.applied)) throw (job.status === 'QUEUED' && options.refused?.(job)) || new SkiplockError('conflict', `job ${id} is ${job.status}: it cannot be ${action}`);
  return job;
}

/**
 * Runs `update` in one transaction behind the job's row lock (lockJob). A cancel locks a parent,
 * then its children; a child's result write locks the child, then its parent (fan-in). When the
 * two meet, PostgreSQL aborts one of them (deadlock, 40P01), having written nothing: the tick
 * writes its result again, and here the transaction is sent again (batchDeadlockSafe).
 */
async function lockedThen(sql: AdminContext['sql'], id: string, update: Statement) {
  return (await batchDeadlockSafe(sql, [lockJob({ id }), update]))[1]!;
}

/** A new payload for a job with recorded steps: those results came from the old payload. */
function stepsConflict(id: string, steps: number): SkiplockError {
  return new SkiplockError(
    'conflict',
    `job ${id} has ${steps} recorded steps, computed from its current payload: a new payload would not match their results. ` +
      'Cancel it and enqueue a new job with the new payload (its time and priority can still be changed)',
  );
}

function notFound(id: string): SkiplockError {
  return new SkiplockError('not_found', `no job ${JSON.stringify(id)}`);
}

function createDatabaseChecks({ sql, now }: AdminContext): DatabaseChecks {
  return {
    async ping() {
      await sql.query(ping());
    },
    async currentTime() {
      const [row] = await sql.query(currentTime({ now: now() }));
      return toDate(row!.now);
    },
  };
}
