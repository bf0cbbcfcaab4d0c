/** What a self-scheduling ticker (the Cloudflare Durable Object alarm) asks before it sleeps. */
import { NOW, clock, type Clock } from './clock.ts';
import { statement, type Statement } from './sql.ts';

/**
 * Milliseconds from now until the next thing a tick could do: the earliest claimable QUEUED job
 * becomes due, or the earliest RUNNING lease expires (for the reaper). Negative means overdue;
 * null means neither exists. Both minima are read from the claim and reap indexes' rows.
 */
export function msUntilNextWork(p: { now: Clock }): Statement {
  return statement(
    `SELECT floor(extract(epoch FROM least(
              (SELECT min(run_at) FROM skiplock.job WHERE status = 'QUEUED' AND attempts < max_attempts),
              (SELECT min(locked_until) FROM skiplock.job WHERE status = 'RUNNING')
            ) - ${NOW}) * 1000)::bigint AS ms`,
    [clock(p.now)],
  );
}
