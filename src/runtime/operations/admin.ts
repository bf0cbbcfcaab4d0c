/**
 * Operating the queue by hand: list, cancel, retry, stats, ping. The HTTP API and the CLI call
 * these through the Skiplock facade; all SQL is in src/store/admin.ts.
 */
import { checkRange, SkiplockError } from '../../core/errors.ts';
import { unstorableText } from '../../core/json.ts';
import { JOB_STATUSES, type Job, type JobDetail, type JobStatus } from '../../core/types.ts';
import * as z from 'zod';
import { isJobId } from '../../core/job-id.ts';
import { flowKeys } from '../flow/keys.ts';
import { cancelJob, currentTime, getJob, lockJob, deadJobsByTask, jobStats, listJobs, pauseTask, ping, rescheduleJob, resumeTask, retryDeadJobs, retryJob, taskOverview } from '../../store/admin.ts';
import { getJobDetail, mapJobDetail } from '../../store/job-detail.ts';
import { checkTaskPayload, MAX_DELAY_MS, payloadMessage, storableInstant, toIssues } from '../tasks/enqueue.ts';
import type { TaskRegistry } from '../tasks/task.ts';
import { unrunnableTasks, type UnrunnableTask } from './unrunnable.ts';
import { jobActivity } from '../../store/dashboard.ts';
import type { Clock } from '../../store/clock.ts';
import { mapJob, toBool, toDate } from '../../store/rows.ts';
import { batchDeadlockSafe, type Row, type Sql, type Statement } from '../../store/sql.ts';

export const LIST_LIMIT = { default: 50, max: 500 } as const;

export { isJobId } from '../../core/job-id.ts';

export interface ListJobsOptions {
  status?: JobStatus;
  task?: string;
  /** Page size, 1 to 500. Default 50. */
  limit?: number;
  /** `nextCursor` of the previous page; omitted for the first page. */
  cursor?: string;
}

/** Jobs one retryDead call puts back, at most. */
export const RETRY_DEAD_LIMIT = 1000;

export interface RetryDeadOptions {
  /** Only this task's DEAD jobs; all of them when omitted. */
  task?: string;
  /** At most this many, 1 to 1000. Default 1000. */
  limit?: number;
}

export interface JobPage {
  /** Newest first. */
  jobs: Job[];
  /** Pass it as `cursor` for the next page; null on the last page. */
  nextCursor: string | null;
}

export type CountsByStatus = Record<JobStatus, number>;

export interface JobStats {
  counts: CountsByStatus;
  byTask: Record<string, CountsByStatus>;
  /** How long the longest-waiting due QUEUED job has waited past its runAt, in ms; 0 when none waits. */
  oldestQueuedAgeMs: number;
  /**
   * The queue's depth: QUEUED jobs due now (`due`) and not yet (`scheduled`: runAt, delay, backoff,
   * debounce), RUNNING and WAITING. Always exact (read through the indexes of unfinished jobs).
   */
  depth: QueueDepth;
  /**
   * `exact`, or `estimated` when more than 10,000 jobs are DONE: `counts.DONE` is then the table's
   * size as the planner estimates it less the other jobs, and each task's DONE that share of it
   * that its jobs have among the newest 10,000 DONE (docs/operations.md, "What a scrape costs").
   * Every other count is exact.
   */
  doneCount: 'exact' | 'estimated';
  /**
   * QUEUED or WAITING jobs of tasks this deployment does not register, by task: nothing here can
   * run them (src/runtime/operations/unrunnable.ts). Another service sharing the table may.
   */
  unrunnable: UnrunnableTask[];
}

export interface QueueDepth {
  due: number;
  scheduled: number;
  running: number;
  waiting: number;
}

export interface CancelResult {
  job: Job;
  /** `cancelled`: it was QUEUED and is CANCELLED now; `requested`: it is RUNNING and was asked to stop. */
  outcome: 'cancelled' | 'requested';
}

/** One minute of `activity()`: jobs by the minute they finished or last failed. */
export interface ActivityMinute {
  /** The start of the minute. */
  minute: Date;
  /** Jobs now DONE that finished in this minute. */
  done: number;
  /** Jobs now DEAD that died in this minute. */
  dead: number;
  /** Jobs now QUEUED for another attempt whose last failure was in this minute. */
  retrying: number;
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

/** One task as `listTasks` shows it. */
export interface TaskInfo {
  name: string;
  state: 'paused' | 'active';
  pausedAt: Date | null;
  counts: CountsByStatus;
  /** QUEUED jobs waiting on a debounce (enqueues with their key still push them back). */
  debounced: number;
}

/** A TaskInfo as JSON (the HTTP API and the CLI). */
export function taskToJson(task: TaskInfo) {
  return { ...task, pausedAt: task.pausedAt?.toISOString() ?? null };
}

const TASK_NAME = z.string().min(1).max(200).refine((name) => unstorableText(name) === undefined, 'not storable text');

export const ACTIVITY_MINUTES = { default: 60, max: 24 * 60 } as const;

export interface AdminOperations {
  /**
   * One job with its durable steps (in the order its handler reached them) and its children (the
   * first 1000 by id), in one statement; undefined when there is no such job.
   */
  getJobDetail(id: string): Promise<JobDetail | undefined>;
  /** One page of jobs, newest first; throws invalid_request for a bad cursor or limit. */
  listJobs(options?: ListJobsOptions): Promise<JobPage>;
  /** QUEUED → CANCELLED, or asks a RUNNING job to stop; not_found, or conflict once finished. */
  cancelJob(id: string): Promise<CancelResult>;
  /** DEAD or CANCELLED → QUEUED, due now, attempts reset; not_found, or conflict otherwise. */
  retryJob(id: string): Promise<Job>;
  /**
   * DEAD → QUEUED for up to `limit` jobs (default and most 1000), oldest first, of one task or of
   * all; resolves to how many. Call it again until it answers 0. CANCELLED jobs are left alone.
   */
  retryDead(options?: RetryDeadOptions): Promise<number>;
  /** Job counts by status and task, and the queue's lag. */
  stats(): Promise<JobStats>;
  /** DEAD jobs by task, by name: the dead letter's counts, without counting the whole table as stats() does. */
  deadByTask(): Promise<{ task: string; dead: number }[]>;
  /**
   * Per minute over the last `minutes` (default 60, at most 1440), oldest first: what finished
   * and what failed, by each job's current state (jobs deleted by retention are not counted).
   */
  activity(minutes?: number): Promise<ActivityMinute[]>;
  /**
   * Changes a QUEUED job's due time, payload (validated against its task as at enqueue) or
   * priority, in one statement; not_found, or conflict for a job in any other state (a claim that
   * got there first wins). `{ delayMs: 0 }` is "run now".
   */
  rescheduleJob(id: string, input: RescheduleInput): Promise<Job>;
  /**
   * No tick claims this task's jobs until resumeTask; running jobs finish, schedules keep firing.
   * Idempotent. A task neither defined here nor registered by any deployment (skiplock
   * .registered_task: written by each deployment's first tick and by migrate) is refused:
   * SkiplockError not_found, nothing written.
   */
  pauseTask(name: string): Promise<TaskInfo>;
  /** Undoes pauseTask (idempotent). Any name: a row paused before names were checked can be cleared. */
  resumeTask(name: string): Promise<TaskInfo>;
  /** Every task registered here, with jobs, or paused: counts by status, paused or active, debounced jobs. */
  listTasks(): Promise<TaskInfo[]>;
  /** Resolves when the database answers; rejects otherwise. */
  ping(): Promise<void>;
  /** The database's now (or the injected test clock): ages shown to people are measured from it. */
  currentTime(): Promise<Date>;
}

/** A new payload for a job with recorded steps: those results came from the old payload. */
function stepsConflict(id: string, steps: number): SkiplockError {
  return new SkiplockError(
    'conflict',
    `job ${id} has ${steps} recorded steps, computed from its current payload: a new payload would not match their results. ` +
      'Cancel it and enqueue a new job with the new payload (its time and priority can still be changed)',
  );
}

export function createAdminOperations(sql: Sql, now: () => Clock, registry?: TaskRegistry): AdminOperations {
  const listTasks = async (only: string | null = null): Promise<TaskInfo[]> => {
    const rows = await sql.query(taskOverview({ task: only }));
    const byName = new Map<string, TaskInfo>();
    for (const name of only === null ? (registry?.keys() ?? []) : [only]) byName.set(name, { name, state: 'active', pausedAt: null, counts: zeroCounts(), debounced: 0 });
    for (const row of rows) {
      const counts = zeroCounts();
      for (const [status, n] of row.counts as [JobStatus, number][]) counts[status] = n;
      const pausedAt = row.paused_at === null || row.paused_at === undefined ? null : toDate(row.paused_at);
      byName.set(String(row.task), { name: String(row.task), state: pausedAt ? 'paused' : 'active', pausedAt, counts, debounced: Number(row.debounced) });
    }
    return [...byName.values()].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  };
  const taskName = (name: string) => {
    const parsed = TASK_NAME.safeParse(name);
    if (!parsed.success) throw new SkiplockError('invalid_request', 'invalid task name', toIssues(parsed.error, ['name']));
    return parsed.data;
  };
  /** One task's row: its counts by the task index, not a count of the whole table. */
  const taskInfo = async (name: string) => (await listTasks(name)).find((t) => t.name === name)!;

  /**
   * Runs `update` in one transaction behind the job's row lock (lockJob). A cancel locks a parent,
   * then its children; a child's result write locks the child, then its parent (fan-in). When the
   * two meet, PostgreSQL aborts one of them (deadlock, 40P01), having written nothing: the tick
   * writes its result again, and here the transaction is sent again (batchDeadlockSafe).
   */
  async function lockedThen(id: string, update: Statement) {
    return (await batchDeadlockSafe(sql, [lockJob({ id }), update]))[1]!;
  }

  /** Runs one of the single-job updates and sorts its answer into updated / unchanged / missing. */
  async function updateOne(
    id: string,
    build: (p: { now: Clock; id: string }) => ReturnType<typeof cancelJob>,
    action: string,
    /** refused: a more precise error for a row the statement left alone. */
    options: { lockFirst?: boolean; refused?: (job: Job) => SkiplockError | undefined } = {},
  ) {
    if (!isJobId(id)) throw notFound(id);
    const update = build({ now: now(), id });
    const [row] = options.lockFirst ? await lockedThen(id, update) : await sql.query(update);
    if (!row) throw notFound(id);
    const job = mapJob(row);
    if (!toBool(row.applied)) throw (job.status === 'QUEUED' && options.refused?.(job)) || new SkiplockError('conflict', `job ${id} is ${job.status}: it cannot be ${action}`);
    return job;
  }

  return {
    async getJobDetail(id) {
      if (!isJobId(id)) return undefined;
      const [row] = await sql.query(getJobDetail({ id }));
      return row ? mapJobDetail(row) : undefined;
    },
    async listJobs(options = {}) {
      const limit = options.limit ?? LIST_LIMIT.default;
      checkRange('limit', limit, LIST_LIMIT.max);
      const beforeId = options.cursor === undefined ? null : decodeCursor(options.cursor);
      const taskProblem = options.task === undefined ? undefined : unstorableText(options.task);
      if (taskProblem) throw new SkiplockError('invalid_request', `invalid task: it ${taskProblem}`, [{ path: ['task'], message: taskProblem }]);
      // One row more than asked tells whether another page exists.
      const rows = await sql.query(
        listJobs({ status: options.status ?? null, task: options.task ?? null, beforeId, limit: limit + 1 }),
      );
      const jobs = rows.slice(0, limit).map(mapJob);
      const last = jobs[jobs.length - 1];
      return { jobs, nextCursor: rows.length > limit && last ? encodeCursor(last.id) : null };
    },
    async cancelJob(id) {
      // In one transaction behind the job's row lock, so that the cascade sees every child (lockJob).
      const job = await updateOne(id, cancelJob, 'cancelled', { lockFirst: true });
      return { job, outcome: job.status === 'CANCELLED' ? 'cancelled' : 'requested' };
    },
    retryJob: (id) => updateOne(id, retryJob, 'retried (only DEAD or CANCELLED jobs can)'),
    async retryDead(options = {}) {
      const limit = options.limit ?? RETRY_DEAD_LIMIT;
      checkRange('limit', limit, RETRY_DEAD_LIMIT);
      // A task name PostgreSQL cannot store is no job's task.
      if (options.task !== undefined && unstorableText(options.task) !== undefined) return 0;
      const [row] = await sql.query(retryDeadJobs({ now: now(), task: options.task ?? null, limit }));
      return Number(row?.retried ?? 0);
    },
    async stats() {
      const [row] = await sql.query(jobStats({ now: now() }));
      const stats = toStats(row);
      return { ...stats, unrunnable: unrunnableTasks(stats.byTask, registry ?? new Map()) };
    },
    async deadByTask() {
      const rows = await sql.query(deadJobsByTask());
      return rows.map((row) => ({ task: String(row.task), dead: Number(row.dead) }));
    },
    async activity(minutes = ACTIVITY_MINUTES.default) {
      checkRange('minutes', minutes, ACTIVITY_MINUTES.max);
      const rows = await sql.query(jobActivity({ now: now(), minutes }));
      return rows.map((row) => ({ minute: toDate(row.minute), done: Number(row.done), dead: Number(row.dead), retrying: Number(row.retrying) }));
    },
    async rescheduleJob(id, raw) {
      const parsed = rescheduleInputSchema.safeParse(raw);
      if (!parsed.success) throw new SkiplockError('invalid_request', 'invalid reschedule', toIssues(parsed.error));
      const input = parsed.data;
      if (!isJobId(id)) throw notFound(id);
      let payload: unknown = null;
      let keys: { flow_key: string | null; rate_key: string | null } = { flow_key: null, rate_key: null };
      if (input.payload !== undefined) {
        // The payload is checked against the job's task, so that task is read first (it never changes).
        const [row] = await sql.query(getJob({ id }));
        if (!row) throw notFound(id);
        const job = mapJob(row);
        if (job.status !== 'QUEUED') throw new SkiplockError('conflict', `job ${id} is ${job.status}: only QUEUED jobs can be rescheduled`);
        if (job.stepCount > 0) throw stepsConflict(id, job.stepCount);
        const task = registry?.get(job.task);
        if (!task) throw new SkiplockError('unknown_task', `task ${JSON.stringify(job.task)} is not registered here: its payload cannot be checked`);
        const checked = checkTaskPayload(task, input.payload, ['payload']);
        if ('issues' in checked) throw new SkiplockError('invalid_payload', payloadMessage(task, checked), checked.issues);
        payload = checked.stored;
        // A new payload may name another flow-control key: computed again, as at enqueue.
        keys = flowKeys(task, checked.value, ['payload']);
      }
      return updateOne(
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
        'rescheduled (only QUEUED jobs can)',
        input.payload === undefined ? {} : { refused: (job) => (job.stepCount > 0 ? stepsConflict(id, job.stepCount) : undefined) },
      );
    },
    async pauseTask(name) {
      const task = taskName(name);
      const [row] = await sql.query(pauseTask({ now: now(), name: task, known: registry?.has(task) ?? false }));
      if (!row)
        throw new SkiplockError(
          'not_found',
          `no task ${task} to pause: no deployment registers it (a deployment registers its tasks with its first tick, or when it migrates); resume accepts any name`,
        );
      return taskInfo(name);
    },
    async resumeTask(name) {
      await sql.query(resumeTask({ name: taskName(name) }));
      return taskInfo(name);
    },
    listTasks: () => listTasks(),
    async ping() {
      await sql.query(ping());
    },
    async currentTime() {
      const [row] = await sql.query(currentTime({ now: now() }));
      return toDate(row!.now);
    },
  };
}

function notFound(id: string): SkiplockError {
  return new SkiplockError('not_found', `no job ${JSON.stringify(id)}`);
}

function zeroCounts(): CountsByStatus {
  return Object.fromEntries(JOB_STATUSES.map((status) => [status, 0])) as CountsByStatus;
}

function toStats(row: Row | undefined): Omit<JobStats, 'unrunnable'> {
  const counts = zeroCounts();
  // A Map, then fromEntries: a task may well be called "__proto__".
  const byTask = new Map<string, CountsByStatus>();
  const depth: QueueDepth = { due: 0, scheduled: 0, running: 0, waiting: 0 };
  const add = (status: JobStatus, task: string, n: number) => {
    counts[status] += n;
    const forTask = byTask.get(task) ?? zeroCounts();
    forTask[status] += n;
    byTask.set(task, forTask);
  };
  for (const [status, task, n, scheduled] of (row?.live ?? []) as [JobStatus, string, number, number][]) {
    add(status, task, n);
    if (status === 'QUEUED') {
      depth.scheduled += scheduled;
      depth.due += n - scheduled;
    } else if (status === 'RUNNING') depth.running += n;
    else if (status === 'WAITING') depth.waiting += n;
  }
  // The newest DONE jobs: all of them (exact), or a sample scaled to the estimated total.
  const sample = (row?.done_sample ?? []) as [string, number][];
  const sampled = Number(row?.done_sampled ?? 0);
  const total = row?.done_estimate ?? row?.done_exact;
  const estimated = total !== null && total !== undefined;
  const scale = estimated && sampled > 0 ? Number(total) / sampled : 1;
  for (const [task, n] of sample) add('DONE', task, Math.round(n * scale));
  if (estimated) counts.DONE = Number(total);
  return {
    counts,
    byTask: Object.fromEntries(byTask),
    oldestQueuedAgeMs: Math.round(Number(row?.oldest_queued_age_ms ?? 0)),
    depth,
    doneCount: estimated ? 'estimated' : 'exact',
  };
}

/*
 * Cursors are opaque to clients: base64url of "j" + the last id of the page. Only the format is
 * checked when decoding; a cursor whose job was deleted still pages correctly (id < cursor).
 */
export function encodeCursor(id: string): string {
  return btoa(`j${id}`).replaceAll('+', '-').replaceAll('/', '_').replace(/=+$/, '');
}

export function decodeCursor(cursor: string): string {
  const invalid = () => new SkiplockError('invalid_request', 'invalid cursor', [{ path: ['cursor'], message: 'not a cursor from a previous page' }]);
  if (!/^[A-Za-z0-9_-]{2,40}$/.test(cursor)) throw invalid();
  let text: string;
  try {
    text = atob(cursor.replaceAll('-', '+').replaceAll('_', '/'));
  } catch {
    throw invalid();
  }
  const id = /^j(\d+)$/.exec(text)?.[1];
  if (id === undefined || !isJobId(id)) throw invalid();
  return id;
}
