/** What a tick asks before it ends: when anything it runs is next due (the wake state, src/runtime/wake/state.ts). */
import { NOW, clock, type Clock } from './clock.ts';
import { oldestPendingEvent, subscriptionValues } from './event-subscriptions.ts';
import { unpaused } from './claim.ts';
import { type FlowLimitRow } from './flow.ts';
import { nextBatchAt, type BatchRow } from './batches.ts';
import { statement, type Statement } from './sql.ts';

/**
 * Schedules whose next run no tick has computed yet (put since the last tick), returned for the
 * caller to compute in JS (cron-parser: up to ~1 ms of CPU each); any more wait for the next tick.
 */
export const UNCOMPUTED_SCHEDULES_LIMIT = 20;

/**
 * Milliseconds from now until the next thing a tick of this deployment could do, as the first
 * row's `ms`:
 *   - the earliest QUEUED job it could claim (one of its tasks, attempts left, a timeout within
 *     the tick's budget) becomes due (skiplock.next_claimable_at, migration 005: a few index
 *     probes, whatever the backlog);
 *   - the earliest lease expiry of a RUNNING job of its tasks (job_reap_idx): the reaper must find
 *     a killed invocation's jobs on time. A job running in another invocation that ends in a retry
 *     is that invocation's to report (its tick ends by writing the wake state too);
 *   - with `retention`, the next retention pass: the oldest finished job it would delete, past its
 *     age, plus RETENTION_SLACK_MS (not urgent: an hour late it deletes an hour's worth in one
 *     pass, instead of waking the database once per finished job), and not before
 *     `retentionWaitMs` (the process's own rate limit of pruning);
 *   - the next run of a schedule it fires: the static ones it defines (`schedules`, by name) and
 *     the dynamic ones of its tasks, enabled — not another service's in a shared database.
 * Work no tick of this deployment can take never keeps it awake. Negative means overdue; null
 * means there is nothing to wait for.
 *
 * A schedule put or changed since the last tick has no next run stored yet (its timing is in cron
 * syntax, which SQL cannot read): such rows follow, `uncomputed`, with their timing, watermark and
 * the clock, at most UNCOMPUTED_SCHEDULES_LIMIT of them.
 */
export function msUntilNextWork(p: {
  now: Clock;
  tasks: readonly string[];
  budgetMs: number;
  schedules: readonly string[];
  /** The limits of the tasks above with flow control (see completeAndClaim); absent: the plain statement. */
  flowLimits?: readonly FlowLimitRow[];
  /** What pruning deletes (ages in ms; null: never); absent: retention is not a reason to wake. */
  retention?: { doneMs: number; cancelledMs: number; deadMs: number | null; retentionWaitMs: number } | null;
  /** Its `on:` subscriptions (task i subscribes to names i): an event another sender left pending for one is due since it was sent. */
  subscriptions?: { tasks: readonly string[]; names: readonly string[] } | null;
  /** Its batch tasks (src/store/batches.ts): a group is due when it is ready (full, or its oldest has waited). */
  batches?: readonly BatchRow[];
}): Statement {
  const r = p.retention ?? null;
  const n = 5 + ((p.flowLimits?.length ?? 0) > 0 ? 2 : 0);
  const s = p.subscriptions ?? null;
  const sub = n + (r ? 4 : 0);
  const limited = (p.flowLimits?.length ?? 0) > 0;
  const limitedNames = new Set(p.flowLimits?.map((l) => l.task));
  const values = [
    clock(p.now), p.tasks, p.budgetMs, p.schedules,
    ...(limited ? [p.tasks.filter((t) => !limitedNames.has(t)), JSON.stringify(p.flowLimits)] : []),
    ...(r ? [r.doneMs, r.cancelledMs, r.deadMs, r.retentionWaitMs] : []),
    ...(s ? subscriptionValues(s) : []),
  ];
  const batches = (p.batches?.length ?? 0) > 0 ? `\n              ${nextBatchAt(`$${values.push(JSON.stringify(p.batches))}`, '$3')},` : '';
  return statement(
    `SELECT false AS uncomputed,
            floor(extract(epoch FROM least(
              -- Paused tasks (migration 011) keep nothing awake.
              ${limited ? NEXT_LIMITED : nextClaimable('$2')},${batches}
              (SELECT min(locked_until) FROM skiplock.queue WHERE status = 'RUNNING' AND task = ANY($2::text[])),${r ? `
              ${nextRetention(n)},` : ''}${s ? `
              -- on: jobs left pending for its tasks by another sender (migration 018).
              ${oldestPendingEvent(`$${sub}`, `$${sub + 1}`, `$${sub + 2}`)},` : ''}
              -- Its static schedules by name; its dynamic ones, the first of each task (schedule_task_due_idx,
              -- migration 008). \`enabled IS NOT FALSE\` (enabled is NOT NULL: the same rows) does not imply
              -- schedule_due_idx's predicate: with a skewed task column the planner took that index and
              -- walked every other service's schedule due earlier (0.3 s at 100,000 schedules).
              (SELECT min(s.next_run_at) FROM skiplock.schedule s WHERE s.name = ANY($4::text[]) AND s.enabled),
              (SELECT min((SELECT s.next_run_at FROM skiplock.schedule s
                            WHERE s.source = 'dynamic' AND s.task = t.task AND s.next_run_at IS NOT NULL AND s.enabled IS NOT FALSE
                            ORDER BY s.next_run_at LIMIT 1))
                 FROM unnest($2::text[]) AS t(task))
            ) - ${NOW}) * 1000)::bigint AS ms,
            NULL AS name, NULL AS cron, NULL::bigint AS every_ms, NULL::text[] AS daily, NULL AS tz, NULL::timestamptz AS watermark, NULL::timestamptz AS now
     UNION ALL
     -- Not computed yet: the NULL entries of schedule_due_idx, few (a tick computes them).
     (SELECT true, NULL, s.name, s.cron, s.every_ms, s.daily, s.tz, s.watermark, ${NOW} FROM skiplock.schedule s
       WHERE s.enabled AND s.next_run_at IS NULL
         AND (s.name = ANY($4::text[]) OR (s.source = 'dynamic' AND s.task = ANY($2::text[])))
       LIMIT ${UNCOMPUTED_SCHEDULES_LIMIT})`,
    values,
  );
}

/** A retention pass is not urgent: it waits this long past the first expiry, and deletes what expired meanwhile too. */
export const RETENTION_SLACK_MS = 3_600_000;

/**
 * When the next retention pass is due: the oldest expiring record's finish + its retention + the
 * slack, not before the process's own rate limit allows (params from $n: done, cancelled, dead
 * ms, wait). DEAD and CANCELLED records are found in finish order by job_failed_at_idx (failed_at:
 * their finish, migration 025). The records' finish times have only a BRIN index (migrations 021
 * and 025: the DONE end stays HOT), which keeps
 * no order, so a DONE record's is read from the oldest records by id, the first 1,000 at most (a
 * job finishes after it is enqueued, and retention leaves the oldest DONE ones first); when none
 * of 1,000 is DONE (there may be DONE ones after them), the next pass is a DONE retention from now. An estimate: the pass itself deletes
 * whatever has expired by then, in any order.
 */
function nextRetention(n: number): string {
  const [done, cancelled, dead, wait] = [n, n + 1, n + 2, n + 3].map((i) => `$${i}`) as [string, string, string, string];
  const ms = (v: string) => `${v}::bigint * interval '1 millisecond'`;
  // greatest() skips NULLs: with nothing to prune, the CASE keeps the answer NULL.
  return `(SELECT CASE WHEN min(f.at) IS NOT NULL THEN greatest(min(f.at) + ${RETENTION_SLACK_MS} * interval '1 millisecond', ${NOW} + ${ms(wait)}) END FROM (
                (SELECT coalesce(min(o.finished_at) FILTER (WHERE o.status = 'DONE'), CASE WHEN count(*) = 1000 THEN ${NOW} END) + ${ms(done)} AS at
                   FROM (SELECT r.status, r.finished_at FROM skiplock.job_record r ORDER BY r.id LIMIT 1000) o)
                UNION ALL (SELECT failed_at + ${ms(cancelled)} FROM skiplock.job_record WHERE failed_status = 'CANCELLED' ORDER BY failed_at LIMIT 1)
                UNION ALL (SELECT failed_at + ${ms(dead)} FROM skiplock.job_record WHERE ${dead}::bigint IS NOT NULL AND failed_status = 'DEAD' ORDER BY failed_at LIMIT 1)) f)`;
}

/** When the next job of these tasks (a parameter) is due: the plain claim's and the fair jobs' (migration 023). */
function nextClaimable(tasks: string): string {
  return `skiplock.next_claimable_at(${unpaused(tasks)}, $3), skiplock.next_fair_at(${unpaused(tasks)}, $3)`;
}

/**
 * With flow control: the plain tasks ($5) as before; for the limited ones ($6), each key's next
 * due job, but not before its rate limit's window opens (its rate-th most recent start + the
 * period): a key held by its rate limit wakes the ticker when it can start again, not before. A
 * key (or a task, for `global`) at its concurrency limit is due when its first holder's lease
 * expires, not now: the holder's own tick reports its end, and counting the key due now made
 * every tick that could not claim it start another at once (issue 31: hundreds of statements a
 * second while a holder ran in another invocation). A resuming
 * job (after a sleep, a yield, its children: migration 015) needs no start: due at its run_at,
 * whatever its key's window holds (job_flow_resume_idx, a few entries).
 */
const NEXT_LIMITED = `${nextClaimable('$5')},
              (SELECT min(greatest(k.run_at,
                        CASE WHEN l.rate IS NOT NULL THEN
                          (SELECT s.started_at + l.period_ms * interval '1 millisecond' FROM skiplock.flow_start s
                            WHERE s.task = k.task AND s.rate_key = k.rate_key
                            ORDER BY s.started_at DESC OFFSET l.rate - 1 LIMIT 1) END,
                        -- A key (or task) at its concurrency limit: its first holder's lease expiry (greatest skips NULLs).
                        CASE WHEN l."limit" IS NOT NULL THEN
                          (SELECT CASE WHEN count(*) >= l."limit" THEN min(r.locked_until) END FROM skiplock.queue r
                            WHERE r.status = 'RUNNING' AND r.task = k.task AND r.flow_key = k.flow_key) END,
                        CASE WHEN l.global IS NOT NULL THEN
                          (SELECT CASE WHEN count(*) >= l.global THEN min(r.locked_until) END FROM skiplock.queue r
                            WHERE r.status = 'RUNNING' AND r.task = k.task AND r.flow_key IS NOT NULL) END))
                 FROM (SELECT DISTINCT ON (j.task, j.flow_key, j.rate_key) j.task, j.flow_key, j.rate_key, j.run_at FROM skiplock.queue j
                        WHERE j.status <> 'RUNNING' AND j.run_at IS NOT NULL AND j.flow_key IS NOT NULL AND j.timeout_ms <= $3 AND j.attempts < j.max_attempts
                          AND j.task IN (SELECT task FROM jsonb_to_recordset($6::jsonb) AS x(task text) EXCEPT SELECT name FROM skiplock.paused_task)
                        ORDER BY j.task, j.flow_key, j.rate_key, j.run_at) k
                 JOIN jsonb_to_recordset($6::jsonb) AS l(task text, "limit" int, global int, rate int, period_ms bigint) ON l.task = k.task),
              (SELECT min(j.run_at) FROM skiplock.queue j
                WHERE j.status <> 'RUNNING' AND j.run_at IS NOT NULL AND j.flow_key IS NOT NULL AND j.rate_attempt = j.attempts + 1
                  AND j.timeout_ms <= $3 AND j.attempts < j.max_attempts
                  AND j.task IN (SELECT task FROM jsonb_to_recordset($6::jsonb) AS x(task text) EXCEPT SELECT name FROM skiplock.paused_task))`;
