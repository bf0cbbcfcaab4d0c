/**
 * Durable steps (migrations/012_durable_steps.sql): the statements that read and write
 * skiplock.job_step. Writes are fenced by the job's locked_by + attempts, as every result is.
 */
import { statement, type Statement } from './sql.ts';

/** The steps of these jobs, in the order their handlers reached them. */
export function listJobSteps(p: { jobIds: readonly string[] }): Statement {
  return statement(`SELECT s.* FROM skiplock.job_step s WHERE s.job_id = ANY ($1::bigint[]) ORDER BY s.job_id, s.seq`, [p.jobIds]);
}
