/**
 * The queue in numbers, for people and /metrics: job counts by status and task with the queue's
 * depth and lag (stats), the dead letter's counts (deadByTask), and what finished or failed minute
 * by minute (activity). Reads only; the SQL is in src/store/admin.ts and dashboard.ts.
 */
import { checkRange } from '../../core/errors.ts';
import { JOB_STATUSES, type JobStatus } from '../../core/types.ts';
import { deadJobsByTask, jobStats } from '../../store/admin.ts';
import { jobActivity } from '../../store/dashboard.ts';
import { toDate } from '../../store/rows.ts';
import type { Row } from '../../store/sql.ts';
import type { SkiplockContext } from '../context.ts';
import { unrunnableTasks, type UnrunnableTask } from './unrunnable.ts';

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

export const ACTIVITY_MINUTES = { default: 60, max: 24 * 60 } as const;

export interface StatsOperations {
  /** Job counts by status and task, and the queue's lag. */
  stats(): Promise<JobStats>;
  /** DEAD jobs by task, by name: the dead letter's counts, without counting the whole table as stats() does. */
  deadByTask(): Promise<{ task: string; dead: number }[]>;
  /**
   * Per minute over the last `minutes` (default 60, at most 1440), oldest first: what finished
   * and what failed, by each job's current state (jobs deleted by retention are not counted).
   */
  activity(minutes?: number): Promise<ActivityMinute[]>;
}

export function createStatsOperations({ sql, now, registry }: Pick<SkiplockContext, 'sql' | 'now' | 'registry'>): StatsOperations {
  return {
    async stats() {
      const [row] = await sql.query(jobStats({ now: now() }));
      const stats = toStats(row);
      return { ...stats, unrunnable: unrunnableTasks(stats.byTask, registry) };
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
  };
}

export function zeroCounts(): CountsByStatus {
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
