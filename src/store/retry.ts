/**
 * A person's retry or restart of a finished job (DEAD or CANCELLED), on the data model of migration
 * 021: the job's record goes back to the placeholder of a live job (QUEUED, no finish, no result)
 * and a queue row is inserted from it, QUEUED, due now, with a fresh set of attempts (last_error
 * is kept); its next run is a new start for a rate limit (rate_attempt, migration 015). Used by
 * retryJob and retryDeadJobs (src/store/admin.ts), the bulk retry (src/store/bulk.ts) and the
 * restart (src/store/restart.ts).
 *
 * Time: `$1` is always the clock (src/store/clock.ts).
 */
import { NOW } from './clock.ts';
import { queueFromRecord } from './queue.ts';

/** The SET of `UPDATE skiplock.job_record j` reviving a finished record (fenced by its caller on DEAD / CANCELLED). */
export const RETRIED = `status = 'QUEUED', failed_status = NULL, failed_at = NULL, attempts = 0, rate_attempt = NULL, run_at = ${NOW}, finished_at = NULL, result = NULL,
  cancel_requested = false, debounce_key = NULL, updated_at = ${NOW}`;

/**
 * `INSERT INTO skiplock.queue …` of the live rows of the records `revived` (a CTE returning `*` of
 * skiplock.job_record, as updated with RETRIED): the state RETRIED gave the record, explicitly.
 */
export const requeueRetried = (revived: string) =>
  queueFromRecord(revived, {
    status: `'QUEUED'`, attempts: '0', rate_attempt: 'NULL', run_at: NOW, debounce_key: 'NULL', cancel_requested: 'false', updated_at: NOW,
  });
