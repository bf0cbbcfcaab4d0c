/**
 * Fair share as it stands (migration 023), for people: the dashboard's Fair share card and
 * skiplock.fairnessStatus(). Reads only. Not on the claim path: it groups every due fair job.
 *
 * Time: `$1` is always the clock (src/store/clock.ts).
 */
import { NOW, clock, type Clock } from './clock.ts';
import { statement, type Statement } from './sql.ts';

/** The fair jobs a claim may take (job_fair_idx's predicate). */
const FAIR = `j.status <> 'RUNNING' AND j.run_at IS NOT NULL AND j.fair_key IS NOT NULL AND j.batch_key IS NULL AND j.flow_key IS NULL`;

/**
 * Per priority level with a due fair job: its lanes with due jobs (keys, and 1 for the jobs without
 * a key when they have one due), its due fair jobs, and the lane its cursor stopped after
 * (`has_cursor` false: none yet; `cursor` null with a cursor: the jobs without a key). Then rows of
 * kind 'key': the `keys` keys with the most due jobs, with their oldest due instant and their
 * RUNNING jobs. (In no order: the caller sorts.)
 */
export function fairnessStatus(p: { now: Clock; keys: number }): Statement {
  return statement(
    `WITH due AS MATERIALIZED (
       SELECT j.priority, j.fair_key, count(*)::int AS n, min(j.run_at) AS oldest FROM skiplock.queue j
        WHERE ${FAIR} AND j.run_at <= ${NOW} GROUP BY 1, 2),
     keyless AS MATERIALIZED (
       SELECT DISTINCT d.priority FROM due d
        WHERE EXISTS (SELECT 1 FROM skiplock.queue j WHERE j.status <> 'RUNNING' AND j.run_at IS NOT NULL AND j.fair_key IS NULL
                        AND j.batch_key IS NULL AND j.priority = d.priority AND j.run_at <= ${NOW}))
     SELECT 'level' AS kind, d.priority, NULL AS key, (count(*) + (max(k.priority) IS NOT NULL)::int)::int AS lanes, sum(d.n)::int AS due,
            NULL::timestamptz AS oldest, NULL::int AS running, (min(c.priority) IS NOT NULL) AS has_cursor, min(c.lane) AS cursor
       FROM due d LEFT JOIN keyless k ON k.priority = d.priority LEFT JOIN skiplock.fair_cursor c ON c.priority = d.priority
      GROUP BY d.priority
     UNION ALL
     (SELECT 'key', t.priority, t.fair_key, NULL, t.n, t.oldest,
             (SELECT count(*)::int FROM skiplock.queue r WHERE r.status = 'RUNNING' AND r.fair_key = t.fair_key), NULL, NULL
        FROM due t ORDER BY t.n DESC, t.fair_key, t.priority DESC LIMIT $2::int)`,
    [clock(p.now), p.keys],
  );
}
