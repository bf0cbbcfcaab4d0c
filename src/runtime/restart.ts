/**
 * A person's restart of a job from one of its steps (docs/steps.md, "Changing a workflow's code"):
 * the way out for a job that died of a deploy that changed its steps. SQL in src/store/restart.ts.
 */
import { SkiplockError } from '../core/errors.ts';
import { unstorableText } from '../core/json.ts';
import type { Job } from '../core/types.ts';
import type { Clock } from '../store/clock.ts';
import { lockJob } from '../store/admin.ts';
import { restartJobs } from '../store/restart.ts';
import { mapJob, toBool } from '../store/rows.ts';
import { sqlState, type Row, type Sql, type Statement } from '../store/sql.ts';
import { isJobId } from './admin.ts';

export interface RestartOptions {
  /**
   * The id of the step to restart from (as recorded: a ctx.patched marker is `patched:<id>`):
   * the steps recorded before it are kept, it and the ones after are forgotten. Step ids are
   * unique per job (the table's key), so it names one step. Omitted or null: every step is
   * forgotten and the job runs from the top with nothing recorded.
   */
  fromStep?: string | null;
}

/**
 * Sends `statements` as one transaction, again (up to three times) when PostgreSQL aborted it as
 * a deadlock (40P01), having written nothing: a cancel or a restart locks a parent before its
 * children, a child's result write locks the child before its parent.
 */
export async function batchDeadlockSafe(sql: Sql, statements: Statement[]): Promise<Row[][]> {
  for (let tries = 1; ; tries++) {
    try {
      return await sql.batch(statements);
    } catch (error) {
      if (sqlState(error) !== '40P01' || tries === 3) throw error;
    }
  }
}

/** Checks a fromStep: a step id as ctx.step takes it (1 to 200 characters of storable text), or null. */
export function checkFromStep(fromStep: unknown): string | null {
  if (fromStep === undefined || fromStep === null) return null;
  if (typeof fromStep !== 'string' || fromStep.length < 1 || fromStep.length > 200 || unstorableText(fromStep) !== undefined)
    throw new SkiplockError('invalid_request', 'invalid fromStep', [{ path: ['fromStep'], message: 'a step id: 1 to 200 characters of text' }]);
  return fromStep;
}

export function createRestart(sql: Sql, now: () => Clock) {
  return {
    /**
     * DEAD, CANCELLED, QUEUED or WAITING → QUEUED, due now, with fresh attempts, keeping the steps
     * recorded before `fromStep`; the children of forgotten invokes are cancelled. not_found for no
     * such job or step; conflict while it runs (or once DONE).
     */
    async restartJob(id: string, options: RestartOptions = {}): Promise<Job> {
      const fromStep = checkFromStep(options?.fromStep);
      if (!isJobId(id)) throw new SkiplockError('not_found', `no job ${JSON.stringify(id)}`);
      const [, rows] = await batchDeadlockSafe(sql, [lockJob({ id }), restartJobs({ now: now(), ids: [id], fromStep, answer: 'rows' })]);
      const row = rows?.[0];
      if (!row) throw new SkiplockError('not_found', `no job ${JSON.stringify(id)}`);
      if (!toBool(row.step_found)) throw new SkiplockError('not_found', `job ${id} has no step ${JSON.stringify(fromStep)}`);
      const job = mapJob(row);
      if (!toBool(row.applied)) throw new SkiplockError('conflict', `job ${id} is ${job.status}: only a DEAD, CANCELLED, QUEUED or WAITING job can be restarted`);
      return job;
    },
  };
}
