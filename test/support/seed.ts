import { queueFromRecord } from '../../src/store/queue.ts';

/**
 * Benches and load tests insert many jobs by hand, in one statement, without the enqueue's
 * per-job work: `seeded(insert)` turns an `INSERT INTO skiplock.job_record (…) SELECT …` into a
 * statement that also gives each live row it inserts its queue row (migration 021), and answers
 * how many it inserted (`n`; or `answer`, SQL over the inserted rows `r`). A WAITING row gets no wake instant (a parent waiting for children).
 */
export function seeded(recordInsert: string, answer = 'count(*)::int AS n'): string {
  return `WITH r AS (${recordInsert} RETURNING *),
     q AS (
       ${queueFromRecord('r', {
         // A hand-made RUNNING row keeps its lease; a WAITING one gets no wake instant.
         ...Object.fromEntries(['locked_by', 'locked_until', 'cancel_requested', 'wait_woken', 'debounce_key'].map((c) => [c, `x.${c}`])),
         run_at: `CASE WHEN x.status = 'WAITING' THEN NULL ELSE x.run_at END`,
       })}
        WHERE x.status IN ('QUEUED', 'RUNNING', 'WAITING')
     )
     SELECT ${answer} FROM r`;
}
