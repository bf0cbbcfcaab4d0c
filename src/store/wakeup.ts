/** What a self-scheduling ticker (the Cloudflare Durable Object alarm) asks before it sleeps. */
import { NOW, clock, type Clock } from './clock.ts';
import { statement, type Statement } from './sql.ts';

/**
 * Milliseconds from now until the next thing a tick of this deployment could do: the earliest
 * QUEUED job it could claim (one of its tasks, attempts left, a timeout within the tick's budget)
 * becomes due (skiplock.next_claimable_at, migration 005: a few index probes, whatever the
 * backlog), or — while a job of its tasks is RUNNING — now: a running job may end in a retry due
 * within a second (or lose its lease to the reaper), so a ticker keeps ticking while work is
 * under way. Work no tick of this deployment can take never keeps it awake. Negative means
 * overdue; null means there is nothing to wait for.
 */
export function msUntilNextWork(p: { now: Clock; tasks: readonly string[]; budgetMs: number }): Statement {
  return statement(
    `SELECT floor(extract(epoch FROM least(
              skiplock.next_claimable_at($2::text[], $3),
              (SELECT ${NOW} WHERE EXISTS (SELECT 1 FROM skiplock.job WHERE status = 'RUNNING' AND task = ANY($2::text[])))
            ) - ${NOW}) * 1000)::bigint AS ms`,
    [clock(p.now), p.tasks, p.budgetMs],
  );
}
