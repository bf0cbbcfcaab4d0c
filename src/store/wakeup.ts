/** What a self-scheduling ticker (the Cloudflare Durable Object alarm) asks before it sleeps. */
import { NOW, clock, type Clock } from './clock.ts';
import { statement, type Statement } from './sql.ts';

/** Schedules whose next run no tick has computed yet, returned for the caller to compute; more wait for a tick. */
export const UNCOMPUTED_SCHEDULES_LIMIT = 100;

/**
 * Milliseconds from now until the next thing a tick of this deployment could do, as the first
 * row's `ms`:
 *   - the earliest QUEUED job it could claim (one of its tasks, attempts left, a timeout within
 *     the tick's budget) becomes due (skiplock.next_claimable_at, migration 005: a few index
 *     probes, whatever the backlog);
 *   - while a job of its tasks is RUNNING, now: a running job may end in a retry due within a
 *     second (or lose its lease to the reaper), so a ticker keeps ticking while work is under way;
 *   - the next run of a schedule it fires: the static ones it defines (`schedules`, by name) and
 *     the dynamic ones of its tasks, enabled (schedule_due_idx, in next_run_at order).
 * Work no tick of this deployment can take never keeps it awake. Negative means overdue; null
 * means there is nothing to wait for.
 *
 * A schedule put or changed since the last tick has no next run stored yet (its timing is in cron
 * syntax, which SQL cannot read): such rows follow, `uncomputed`, with their timing, watermark and
 * the clock, at most UNCOMPUTED_SCHEDULES_LIMIT of them.
 */
export function msUntilNextWork(p: { now: Clock; tasks: readonly string[]; budgetMs: number; schedules: readonly string[] }): Statement {
  return statement(
    `WITH mine AS (
       SELECT s.name, s.cron, s.every_ms, s.daily, s.tz, s.watermark, s.next_run_at FROM skiplock.schedule s
        WHERE s.enabled AND (s.name = ANY($4::text[]) OR (s.source = 'dynamic' AND s.task = ANY($2::text[])))
     ),
     uncomputed AS (SELECT * FROM mine WHERE next_run_at IS NULL ORDER BY watermark LIMIT ${UNCOMPUTED_SCHEDULES_LIMIT})
     SELECT false AS uncomputed,
            floor(extract(epoch FROM least(
              skiplock.next_claimable_at($2::text[], $3),
              (SELECT ${NOW} WHERE EXISTS (SELECT 1 FROM skiplock.job WHERE status = 'RUNNING' AND task = ANY($2::text[]))),
              (SELECT min(next_run_at) FROM mine)
            ) - ${NOW}) * 1000)::bigint AS ms,
            NULL AS name, NULL AS cron, NULL::bigint AS every_ms, NULL::text[] AS daily, NULL AS tz, NULL::timestamptz AS watermark, NULL::timestamptz AS now
     UNION ALL
     SELECT true, NULL, u.name, u.cron, u.every_ms, u.daily, u.tz, u.watermark, ${NOW} FROM uncomputed u`,
    [clock(p.now), p.tasks, p.budgetMs, p.schedules],
  );
}
