/** What a self-scheduling ticker (the Cloudflare Durable Object alarm) asks before it sleeps. */
import { NOW, clock, type Clock } from './clock.ts';
import { statement, type Statement } from './sql.ts';

/**
 * Milliseconds from now until the next thing a tick could do: the earliest claimable QUEUED job
 * becomes due, or — while any job is RUNNING — now: a running job may end in a retry due within
 * a second (or lose its lease to the reaper), so a ticker keeps ticking while work is under way.
 * Negative means overdue; null means the queue is empty and nothing runs.
 */
export function msUntilNextWork(p: { now: Clock }): Statement {
  return statement(
    `SELECT floor(extract(epoch FROM least(
              (SELECT min(run_at) FROM skiplock.job WHERE status = 'QUEUED' AND attempts < max_attempts),
              (SELECT ${NOW} WHERE EXISTS (SELECT 1 FROM skiplock.job WHERE status = 'RUNNING'))
            ) - ${NOW}) * 1000)::bigint AS ms`,
    [clock(p.now)],
  );
}
