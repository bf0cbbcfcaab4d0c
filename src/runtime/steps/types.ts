/** What a run knows of its recorded steps, and their limits: shared by steps, waits and history without importing them. */
import type { JobStep } from '../../core/types.ts';

/** The limits of durable steps, each refused with a PermanentError (or a TypeError for a bad argument). */
export const STEP_LIMITS = {
  /** A ctx.step's output, in bytes of JSON: 256 KiB. */
  maxOutputBytes: 256 * 1024,
  /**
   * All outputs stored for one job together — ctx.step outputs, the events its waits took and its
   * callbacks' data (children's results not counted): 4 MiB.
   */
  maxJobOutputBytes: 4 * 1024 * 1024,
  /** Steps (step, sleep, invoke) per job. */
  maxSteps: 10_000,
  /** A step id's length, in characters. */
  maxIdLength: 200,
  /** The longest sleep: 365 days. */
  maxSleepMs: 365 * 24 * 3600 * 1000,
  /**
   * Before a new step's fn runs, the run yields (the job is released, due now, the attempt given
   * back) when less than max(this, the longest step seen for the job) is left before the
   * invocation's deadline or the job's timeout. The first new step of a run always runs.
   */
  minYieldMarginMs: 100,
} as const;

/** A recorded step, as the run reads it: the row, and for an invoke how its child ended. */
export interface StoredStep extends JobStep {
  childStatus: 'DONE' | 'DEAD' | 'CANCELLED' | null;
}
