/**
 * Tasks by hand: every task with its counts by status (listTasks), and pausing and resuming one —
 * no tick claims a paused task's jobs. The SQL is in src/store/admin.ts.
 */
import { SkiplockError } from '../../core/errors.ts';
import { unstorableText } from '../../core/json.ts';
import type { JobStatus } from '../../core/types.ts';
import * as z from 'zod';
import { pauseTask, resumeTask, taskOverview } from '../../store/admin.ts';
import { toDate } from '../../store/rows.ts';
import type { SkiplockContext } from '../context.ts';
import { toIssues } from '../tasks/enqueue.ts';
import { zeroCounts, type CountsByStatus } from './stats.ts';

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

export interface TaskOperations {
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
}

export function createTaskOperations(ctx: Pick<SkiplockContext, 'sql' | 'now' | 'registry'>): TaskOperations {
  const { sql, now, registry } = ctx;
  /** One task's row: its counts by the task index, not a count of the whole table. */
  const taskInfo = async (name: string) => (await listTasks(ctx, name)).find((t) => t.name === name)!;
  return {
    async pauseTask(name) {
      const task = taskName(name);
      const [row] = await sql.query(pauseTask({ now: now(), name: task, known: registry.has(task) }));
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
    listTasks: () => listTasks(ctx),
  };
}

/** Every task (registered here, with jobs, or paused), by name; or only the one named `only`. */
async function listTasks({ sql, registry }: Pick<SkiplockContext, 'sql' | 'registry'>, only: string | null = null): Promise<TaskInfo[]> {
  const rows = await sql.query(taskOverview({ task: only }));
  const byName = new Map<string, TaskInfo>();
  for (const name of only === null ? registry.keys() : [only]) byName.set(name, { name, state: 'active', pausedAt: null, counts: zeroCounts(), debounced: 0 });
  for (const row of rows) {
    const counts = zeroCounts();
    for (const [status, n] of row.counts as [JobStatus, number][]) counts[status] = n;
    const pausedAt = row.paused_at === null || row.paused_at === undefined ? null : toDate(row.paused_at);
    byName.set(String(row.task), { name: String(row.task), state: pausedAt ? 'paused' : 'active', pausedAt, counts, debounced: Number(row.debounced) });
  }
  return [...byName.values()].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

function taskName(name: string): string {
  const parsed = TASK_NAME.safeParse(name);
  if (!parsed.success) throw new SkiplockError('invalid_request', 'invalid task name', toIssues(parsed.error, ['name']));
  return parsed.data;
}
