/**
 * Jobs nothing here can run (issue 25): QUEUED or WAITING jobs of a task this deployment does
 * not register (renamed, removed, or another service's). A deployment knows its own registry
 * only: it cannot tell a task no deployment has from one another service sharing the table runs,
 * so this is a list to look at, not an error. RUNNING jobs are not counted: something runs them.
 */
import type { JobStatus } from '../../core/types.ts';

export interface UnrunnableTask {
  task: string;
  /** Jobs no tick here claims: they wait for a deployment that registers the task. */
  queued: number;
  /** Parents waiting for children: QUEUED, and then stranded too, once their children end. */
  waiting: number;
}

/** From the counts by task (stats): the tasks with QUEUED or WAITING jobs that `registered` lacks, by name. */
export function unrunnableTasks(byTask: Readonly<Record<string, Record<JobStatus, number>>>, registered: ReadonlySet<string> | ReadonlyMap<string, unknown>): UnrunnableTask[] {
  return Object.entries(byTask)
    .filter(([task, counts]) => !registered.has(task) && counts.QUEUED + counts.WAITING > 0)
    .map(([task, counts]) => ({ task, queued: counts.QUEUED, waiting: counts.WAITING }))
    .sort((a, b) => (a.task < b.task ? -1 : a.task > b.task ? 1 : 0));
}
