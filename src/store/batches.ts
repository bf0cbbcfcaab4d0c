/**
 * Batch handlers' SQL (issue 35 item 2; migrations/024_batches.sql): the claim's `batched` CTE,
 * the wake state's term, and the adoption of jobs left with a batch key by a task that is no
 * longer a batch task here.
 */
import { statement, type Statement } from './sql.ts';

/** One batch task as skiplock.claim_batch_jobs reads it (src/runtime/tick builds them from the registry). */
export interface BatchRow {
  task: string;
  max_size: number;
  max_wait_ms: number;
}

/** A batches parameter (a jsonb array of {task, ...}) without the paused tasks (as claim.ts unpausedLimits). */
const unpausedBatches = (param: string) =>
  `(SELECT coalesce(jsonb_agg(e), '[]'::jsonb) FROM jsonb_array_elements(${param}::jsonb) e
     WHERE NOT EXISTS (SELECT 1 FROM skiplock.paused_task p WHERE p.name = e->>'task'))`;

/**
 * completeAndClaim's batch claim, taken before the plain one: at most `slots` ready groups, each
 * a set of jobs with its `batch_group` (the tick runs a group as one call). `slots`, `at`,
 * `budget` and `batches` are SQL expressions (parameters).
 */
export const batchedCte = (slots: string, at: string, budget: string, batches: string) => `batched AS MATERIALIZED (
       SELECT job_id AS id, batch_group FROM skiplock.claim_batch_jobs(${slots}::int, ${at}, ${budget}, ${unpausedBatches(batches)})
     )`;

/** The slots the batch claim left to the plain claim: one per group it took. */
const slotsAfterBatches = (slots: string) => `(${slots}::int - (SELECT count(DISTINCT batch_group)::int FROM batched))`;

/**
 * completeAndClaim's claim with batch tasks (`batches`: their parameter; null: none): the batch
 * claim first, then `claim` (the plain or limited one, built for a number of slots) gets the slots
 * it left; without batch tasks, `claim` of all the slots ($4).
 */
export const batchClaim = (claim: (slots: string) => string, batches: string | null, at: string) =>
  batches ? `${batchedCte('$4', at, '$5', batches)},\n     ${claim(slotsAfterBatches('$4'))}` : claim('$4');

/** The wake state's term: when the first group of these batch tasks becomes ready. */
export const nextBatchAt = (batches: string, budget: string) => `skiplock.next_batch_at(${unpausedBatches(batches)}, ${budget})`;

/** completeAndClaim's probe (with probeLeases): a due job of these tasks (without `batch` here) holds a batch key. */
export const strandedBatchJobsExist = (tasks: string) =>
  `EXISTS (SELECT 1 FROM skiplock.queue x WHERE x.status <> 'RUNNING' AND x.run_at IS NOT NULL AND x.batch_key IS NOT NULL AND x.task = ANY (${tasks}::text[]))`;

/** At most this many jobs are adopted per statement. */
export const ADOPT_BATCH_LIMIT = 1000;

/**
 * Jobs with a batch key whose task is not a batch task in this deployment (the option was removed,
 * or a deployment that had it enqueued them): no claim would take them (the plain claim leaves
 * batch keys alone). Their key is cleared, so the plain claim takes them. `tasks`: this
 * deployment's tasks without `batch`. Probes job_batch_idx per task.
 */
export function adoptStrandedBatchJobs(p: { tasks: readonly string[]; limit?: number }): Statement {
  return statement(
    `UPDATE skiplock.queue q SET batch_key = NULL
      WHERE q.id = ANY (ARRAY(
        SELECT j.id FROM skiplock.queue j
         WHERE j.status <> 'RUNNING' AND j.run_at IS NOT NULL AND j.batch_key IS NOT NULL AND j.task = ANY ($1::text[])
         LIMIT $2 FOR UPDATE SKIP LOCKED))
      RETURNING q.id`,
    [p.tasks, p.limit ?? ADOPT_BATCH_LIMIT],
  );
}

/** At most this many of a RUNNING batch item's call mates are listed (the dashboard). */
export const BATCH_MATES_LISTED = 100;

/**
 * The other jobs claimed with a RUNNING job of a batch task: RUNNING under the same locked_by (a
 * claim's token, unique per claiming statement), of the same task and batch key. Reads the RUNNING
 * jobs only (job_reap_idx).
 */
export function batchMates(p: { id: string; lockedBy: string; task: string; batchKey: string }): Statement {
  return statement(
    `SELECT q.id::text AS id FROM skiplock.queue q
      WHERE q.status = 'RUNNING' AND q.locked_by = $2 AND q.task = $3 AND q.batch_key = $4 AND q.id <> $1::bigint
      ORDER BY q.id LIMIT ${BATCH_MATES_LISTED}`,
    [p.id, p.lockedBy, p.task, p.batchKey],
  );
}
