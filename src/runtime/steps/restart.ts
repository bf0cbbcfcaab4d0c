/**
 * A person's restart of a job from one of its steps (docs/steps.md, "Changing a workflow's code"):
 * the way out for a job that died of a deploy that changed its steps. SQL in src/store/restart.ts.
 */
import { SkiplockError } from '../../core/errors.ts';
import { RESTARTABLE_STATUSES } from '../../core/state.ts';
import { unstorableText } from '../../core/json.ts';
import type { Job } from '../../core/types.ts';
import type { Clock } from '../../store/clock.ts';
import { getJob, lockJob } from '../../store/admin.ts';
import { restartJobs } from '../../store/restart.ts';
import { mapJob, toBool } from '../../store/rows.ts';
import { batchDeadlockSafe, type Sql } from '../../store/sql.ts';
import { isJobId } from '../../core/job-id.ts';
import { listJobSteps } from '../../store/steps.ts';
import { mapJobStep } from '../../store/rows.ts';
import { locateStep } from './replay.ts';
import type { StoredStep } from './steps.ts';
import type { TaskRegistry } from '../tasks/task.ts';

export interface RestartOptions {
  /**
   * The id of the step to restart from (as recorded: a ctx.patched marker is `patched:<id>`):
   * the steps recorded before it are kept, it and the ones after are forgotten. Step ids are
   * unique per job (the table's key), so it names one step. A step the job has not recorded but
   * the current code calls (one a deploy inserted) works too, on a deployment that registers the
   * task: the current handler is replayed (no step runs, nothing is written) up to it, and the
   * recorded steps it passed on the way are kept. Omitted or null: every step is forgotten and the
   * job runs from the top with nothing recorded.
   */
  fromStep?: string | null;
}

/** Checks a fromStep: a step id as ctx.step takes it (1 to 200 characters of storable text), or null. */
export function checkFromStep(fromStep: unknown): string | null {
  if (fromStep === undefined || fromStep === null) return null;
  if (typeof fromStep !== 'string' || fromStep.length < 1 || fromStep.length > 200 || unstorableText(fromStep) !== undefined)
    throw new SkiplockError('invalid_request', 'invalid fromStep', [{ path: ['fromStep'], message: 'a step id: 1 to 200 characters of text' }]);
  return fromStep;
}

/**
 * A fromStep the job has not recorded, named by the current code (the step a deploy inserted):
 * the recorded step the current handler reaches it before (src/runtime/steps/replay.ts locateStep), so
 * that everything recorded before that point is kept. Reads only.
 */
async function recordedStepAt(sql: Sql, registry: TaskRegistry, id: string, fromStep: string): Promise<string | undefined> {
  const [row] = await sql.query(getJob({ id }));
  if (!row || !registry.has(String(row.task))) return undefined;
  const job = mapJob(row);
  const steps = (await sql.query(listJobSteps({ jobIds: [id] }))).map((r) => ({ ...mapJobStep(r), childStatus: (r.child_status ?? null) as StoredStep['childStatus'] }));
  const located = await locateStep(registry, job, steps, fromStep);
  if ('reason' in located) throw new SkiplockError('not_found', `job ${id} has no step ${JSON.stringify(fromStep)}, and ${located.reason}`);
  if (!located.next) throw new SkiplockError('conflict', `job ${id}: the current code reaches ${JSON.stringify(fromStep)} after every recorded step: there is nothing to forget (retry it instead)`);
  return located.next.id;
}

/** Why a job in `status` is not restarted (409). */
export function restartRefusal(id: string, status: Job['status']): string {
  const why =
    status === 'DONE' ? 'it succeeded'
    : status === 'RUNNING' ? 'it is running: cancel it, and restart it once it has stopped'
    : 'it is live (already restarted or retried, or not yet finished): let it run, or cancel it first to restart it';
  return `job ${id} is ${status}: only a DEAD or CANCELLED job can be restarted; ${why}`;
}

export function createRestart(sql: Sql, now: () => Clock, registry?: TaskRegistry) {
  const send = (id: string, fromStep: string | null) =>
    batchDeadlockSafe(sql, [lockJob({ id }), restartJobs({ now: now(), ids: [id], fromStep, answer: 'rows' })]).then((answers) => answers[1]?.[0]);
  return {
    /**
     * DEAD or CANCELLED → QUEUED, due now, with fresh attempts, keeping the steps recorded before
     * `fromStep`; the children of forgotten invokes are cancelled. not_found for no such job or
     * step; conflict for a live job (QUEUED, WAITING, RUNNING: one already restarted among them,
     * so the same restart sent twice runs nothing twice) or a DONE one.
     */
    async restartJob(id: string, options: RestartOptions = {}): Promise<Job> {
      const fromStep = checkFromStep(options?.fromStep);
      if (!isJobId(id)) throw new SkiplockError('not_found', `no job ${JSON.stringify(id)}`);
      let row = await send(id, fromStep);
      if (!row) throw new SkiplockError('not_found', `no job ${JSON.stringify(id)}`);
      // A job in no state for a restart is refused before its step is looked for: the same
      // restart sent again finds the job live, its fromStep possibly forgotten by the first one.
      if (!toBool(row.applied) && !RESTARTABLE_STATUSES.includes(String(row.status) as Job['status'])) throw new SkiplockError('conflict', restartRefusal(id, mapJob(row).status));
      if (!toBool(row.step_found) && fromStep !== null && registry) {
        const recorded = await recordedStepAt(sql, registry, id, fromStep);
        if (recorded !== undefined) row = await send(id, recorded);
        if (!row) throw new SkiplockError('not_found', `no job ${JSON.stringify(id)}`);
      }
      if (!toBool(row.step_found)) throw new SkiplockError('not_found', `job ${id} has no step ${JSON.stringify(fromStep)}`);
      const job = mapJob(row);
      if (!toBool(row.applied)) throw new SkiplockError('conflict', restartRefusal(id, job.status));
      return job;
    },
  };
}
