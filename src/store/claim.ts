/**
 * The tick's statement: completeAndClaim writes the previous batch's results and claims the next
 * batch in one round trip, and answers what the tick asks besides (schedules, leases, events due).
 * Every state change is this one statement, so it works over Neon's HTTP driver.
 *
 * Time: `$1` is always the clock (src/store/clock.ts).
 */
import { MS, NOW, clock, epochMs, leaseUntil, type Clock } from './clock.ts';
import type { JobStatus } from '../core/types.ts';
import type { FlowLimitRow } from './flow.ts';
import { appendAttempt } from './history.ts';
import { preparedStatement, statement, type Statement } from './sql.ts';
import { withStoredForm } from './stored-tick.ts';
import { fanInCtes } from './steps.ts';
import { recordEnd, settleCtes } from './queue.ts';
import { batchClaim, strandedBatchJobsExist, type BatchRow } from './batches.ts';
import { pendingEventsExist, registerTasksCte, subscriptionValues, type RegisteredTaskRow, type Subscriptions } from './event-subscriptions.ts';

/** A finished run, as the tick writes it back. */
export interface ResultRow {
  id: string;
  attempt: number;
  status: Exclude<JobStatus, 'RUNNING'>;
  result: unknown;
  error: string | null;
  /** For status QUEUED: the retry delay after now. */
  delay_ms: number;
  /** For status QUEUED: an absolute due time instead (a ctx.sleep's wake time, database clock). */
  run_at?: string | null;
  /**
   * Back to QUEUED without spending the attempt (stopped by the worker, not by the job; or a
   * durable job suspending itself). With status WAITING (ctx.invoke) always true.
   */
  release: boolean;
  /** For status DONE of a job fired by a schedule: the schedule's new recurring state (setState). */
  state?: { value: unknown } | undefined;
  /**
   * The locked_by its claim wrote (the fence, with `attempt`). Default: the statement's workerId.
   * Unique per claiming statement, so a run is told apart from a later run of the same job and
   * attempt number (a DEAD job retried by a person restarts its attempts at 0).
   */
  locked_by?: string;
  /** What the handler last reported with ctx.progress, if it changed since the last write. */
  progress?: { value: unknown } | undefined;
  /** The attempt span's traceparent, kept in its history entry; null without tracing. */
  trace?: string | null;
  /** For status WAITING: the job waits for an event or a callback (ctx.waitForEvent), not for children. */
  event_wait?: boolean;
}

export interface CompleteAndClaimParams {
  now: Clock;
  /** Written into locked_by of the jobs this statement claims (the tick adds a claim number to its own id). */
  workerId: string;
  /** Results of the previous batch to write, fenced by locked_by + attempt. */
  results: readonly ResultRow[];
  /** How many jobs to claim (the free slots); 0 only writes. */
  limit: number;
  /** Only jobs whose timeout fits in what is left of the invocation are claimed. */
  budgetMs: number;
  /**
   * Only jobs of these tasks are claimed: those this deployment can run. A job of another task
   * waits for a deployment that has it (a rolling deploy, a CLI without the tasks) instead of dying.
   */
  tasks: readonly string[];
  /** Lease = min(timeout + leaseGraceMs, leaseMs); long jobs are heartbeated. */
  leaseMs: number;
  leaseGraceMs: number;
  /**
   * When given, the answer also says whether a schedule is due that this deployment fires (the
   * dynamic ones and these static names, of the tasks above): `schedule_due`. The tick fires
   * schedules only then, instead of reading them on every poll. Default null (not asked).
   */
  staticSchedules?: readonly string[] | null;
  /**
   * The limits of the tasks above that have flow control (concurrency, rateLimit): their jobs are
   * claimed by skiplock.claim_limited_jobs (migrations 010, 015), first, and the rest of `limit` by the plain
   * claim. Empty or absent: the statement is the plain one, unchanged.
   */
  flowLimits?: readonly FlowLimitRow[];
  /**
   * Also answer whether some lease has expired (`reap_due`): the tick asks at its start and then at
   * most every reapIntervalMs, and sends the reaper only when one has. Not on every statement: the
   * probe walks the reaper's index entries of finished jobs' RUNNING versions until VACUUM removes
   * them (a millisecond per 100,000 jobs finished since), as the reaper's own scan does.
   */
  probeLeases?: boolean;
  /**
   * Some result of this batch is a child's (ctx.invoke: job.parentId): the statement then also
   * does the fan-in (src/store/steps.ts fanInCtes). Default false: the plain statement.
   */
  fanIn?: boolean;
  /**
   * This deployment's tasks and their `on:` names, to register (skiplock.registered_task, migration
   * 018): given on an instance's first claim only, so the registration costs no statement of its own.
   */
  register?: readonly RegisteredTaskRow[] | null;
  /**
   * This deployment's `on:` subscriptions (task i subscribes to names i): the answer also says
   * whether an event left a job of one of them pending (`events_due`: sent by a process without the
   * task), so the tick dispatches only then. Asked at a tick's start and then every reapIntervalMs,
   * with the lease probe (rows left for a task no deployment runs any more stay until retention:
   * not on every claim). Absent or null: not asked.
   */
  subscriptions?: Subscriptions | null;
  /** Its batch tasks: ready groups are claimed first, one slot each; rows say their `batch_group` (src/store/batches.ts). */
  batches?: readonly BatchRow[];
  /** Its tasks without `batch`: with probeLeases, `stranded_due` says whether a due job of one holds a batch key (batches.ts). */
  unbatched?: readonly string[] | null;
}


/**
 * The tick's steady-state statement: writes the previous batch's results and claims the next
 * batch in one round trip. The two UPDATEs touch disjoint rows (RUNNING vs QUEUED).
 * Returns one row per claimed job (`written` null) and one more row, job columns null, whose
 * `written` lists the ids whose result landed (the rest were stale) and `cancelled` those of them
 * that ended CANCELLED instead of the retry or release asked for, and `reap_due` (with
 * probeLeases): whether some lease has expired, so the tick sends the reaper only then. Sent once: repeated on every
 * claimed row it cost more than the claim (100 copies of a 100-id array per round trip).
 *
 * Its plan must hold whatever the statistics say, since a queue's are stale by nature (a burst of
 * enqueues, before autovacuum's next ANALYZE): the candidates come from claimable_jobs (migration
 * 003: the ordered index scan, never a sort of every QUEUED row), and both UPDATEs find their rows
 * by id (`id = ANY(...)`) rather than by a join the planner may turn into a scan of the whole table.
 *
 * The write has two shapes. The common batch, every result DONE with no schedule state and no
 * child's, is written by doneWrite: arrays, one SET list. Any other batch by GENERAL_WRITE: the
 * results as JSON parsed once (MATERIALIZED), a CASE per column over the outcome, the schedule's
 * recurring state, and with `fanIn` a child's end reaching its parent. The answer is the same.
 * A claimed job's columns the queue lacks come from the record by id; schedule_due: 2 index probes.
 *
 * The commonest statement, that write with the plain claim and no probe, is also stored in the
 * database as a function (src/store/stored-tick.ts): a driver that does not prepare statements
 * sends a call of it, which PostgreSQL does not parse and plan again on every call.
 */
export function completeAndClaim(p: CompleteAndClaimParams): Statement {
  const limited = (p.flowLimits?.length ?? 0) > 0;
  const limitedNames = new Set(p.flowLimits?.map((l) => l.task));
  const plainDone = !p.fanIn && p.results.every((r) => r.status === 'DONE' && r.state === undefined);
  const values: unknown[] = [
    clock(p.now), p.workerId, plainDone ? p.results.map((r) => r.id) : JSON.stringify(p.results), p.limit, p.budgetMs, p.leaseMs, p.leaseGraceMs,
    p.tasks, p.staticSchedules ?? null, ...(limited ? [JSON.stringify(p.flowLimits), p.tasks.filter((t) => !limitedNames.has(t))] : []),
  ];
  const batches = (p.batches?.length ?? 0) > 0 ? `$${values.push(JSON.stringify(p.batches))}` : null;
  const stranded = p.probeLeases && p.unbatched ? strandedBatchJobsExist(`$${values.push(p.unbatched)}`) : 'NULL::boolean';
  const register = p.register && p.register.length > 0 ? `,\n     ${registerTasksCte(`$${values.push(JSON.stringify(p.register))}`)}` : '';
  const eventsDue = p.subscriptions ? pendingEventsExist(...(subscriptionValues(p.subscriptions).map((v) => `$${values.push(v)}`) as [string, string, string])) : 'NULL::boolean';
  // Not prepared when it asks about pending events or registers (at most every reapIntervalMs):
  // a prepared statement's generic plan cannot estimate `task = ANY ($n)` and scanned every pending
  // row (11 ms past 20,000 left for a task no deployment runs); planned each time, it is an index probe.
  const build = p.subscriptions || register ? statement : preparedStatement;
  const storable = plainDone && !limited && !batches && !register && !p.subscriptions && !p.probeLeases;
  const tick = build(
    `WITH ${plainDone ? doneWrite(p, values) : GENERAL_WRITE(p.fanIn === true)},
     ${batchClaim(limited ? claimLimited : claimPlain, batches, NOW)},
     claimed AS (
       UPDATE skiplock.queue j SET
         status = 'RUNNING', attempts = j.attempts + 1, locked_by = $2,
         locked_until = ${leaseUntil('$7', '$6')}, updated_at = ${NOW},
         started_at = ${NOW}, progress = NULL, debounce_key = NULL${limited ? RATE_ATTEMPT : ''}
       WHERE j.id = ANY (ARRAY(SELECT id FROM next${batches ? ' UNION ALL SELECT id FROM batched' : ''}))${p.fanIn ? NOT_A_PARENT_OF_WRITTEN : ''}
       RETURNING ${CLAIMED_COLUMNS}
     ),
     claimed_jobs AS (
       SELECT c.*, ${RECORD_COLUMNS}${batches ? ', (SELECT b.batch_group FROM batched b WHERE b.id = c.id) AS batch_group' : ''}
         FROM claimed c JOIN skiplock.job_record r ON r.id = c.id
        WHERE r.id = ANY (ARRAY(SELECT id FROM claimed))
     )${limited ? STARTED : ''}${register}
     SELECT w.written, w.cancelled, w.schedule_due, w.reap_due, w.events_due, w.stranded_due, claimed_jobs.*
       FROM (SELECT coalesce(jsonb_agg(id::text), '[]'::jsonb) AS written,
                    coalesce(jsonb_agg(id::text) FILTER (WHERE status = 'CANCELLED'), '[]'::jsonb) AS cancelled,
                    ($9::text[] IS NOT NULL AND (
                       EXISTS (SELECT 1 FROM skiplock.schedule s WHERE s.enabled AND s.next_run_at <= ${NOW}
                                  AND (s.source = 'dynamic' OR s.name = ANY ($9::text[])) AND s.task = ANY ($8::text[]))
                    OR EXISTS (SELECT 1 FROM skiplock.schedule s WHERE s.enabled AND s.next_run_at IS NULL
                                  AND (s.source = 'dynamic' OR s.name = ANY ($9::text[])) AND s.task = ANY ($8::text[])))) AS schedule_due,
                    ${p.probeLeases ? LEASE_EXPIRED : 'NULL::boolean'} AS reap_due,
                    ${eventsDue} AS events_due,
                    ${stranded} AS stranded_due
               FROM written) AS w
       FULL JOIN claimed_jobs ON false`,
    values,
  );
  return storable ? withStoredForm(tick) : tick;
}

/**
 * completeAndClaim's general write, first part: the fenced jobs, locked, and what each becomes
 * (`outcome`), from the results `results` holds.
 */
const outcomeCte = () => `-- The fenced jobs, locked (their latest version: a cancel or a wake committed since this
     -- statement began is seen), with what each becomes. Then the ones still live are updated in
     -- the queue, and the ones that ended leave it for their record: two statements' worth of
     -- writes decided once, on the locked rows.
     -- A retry or a release of a job whose cancel was asked while it ran ends CANCELLED (the
     -- attempt is kept: it ran); a cancel must not be dropped because the attempt failed.
     outcome AS MATERIALIZED (
       SELECT j.id, j.locked_by, j.priority, j.started_at, j.flow_key, j.rate_key, j.rate_attempt, j.pending_children, j.step_count,
              j.schedule_name, j.parent_id, r.result, r.trace,
         -- WAITING (ctx.invoke): QUEUED at once when the children ended before this write (their
         -- ends only counted down: this row was RUNNING then), by the counter or by the step rows.
         -- An event or callback wait (migration 016): QUEUED at once when one of its waits was
         -- completed while it ran (wait_woken, read from the locked row). Otherwise a job its own
         -- handler suspended is WAITING (CONTRACT "How jobs read"): a sleep not yet over, or a
         -- wait, with its wake instant as run_at (a timeout), or none; the claim takes it then.
         CASE WHEN r.status IN ('QUEUED', 'WAITING') AND j.cancel_requested THEN 'CANCELLED'
              WHEN r.status = 'WAITING' AND ${WOKEN} THEN 'QUEUED'
              WHEN ${SLEEPING} THEN 'WAITING'
              ELSE r.status END AS status,
         CASE WHEN r.release AND NOT j.cancel_requested THEN j.attempts - 1 ELSE j.attempts END AS attempts,
         coalesce(r.error, j.last_error) AS last_error,
         CASE WHEN r.status IN ('QUEUED', 'WAITING') AND NOT j.cancel_requested
              THEN CASE WHEN r.status = 'WAITING' AND ${WOKEN} THEN ${NOW} WHEN r.status = 'WAITING' THEN r.run_at
                        ELSE coalesce(r.run_at, ${NOW} + r.delay_ms ${MS}) END
              ELSE j.run_at END AS run_at,
         coalesce(r.progress -> 'value', j.progress) AS progress,
         -- src/store/history.ts: any other attempt's entry, by the statement that writes its outcome.
         -- A DONE attempt is read from the record (finished_by, finished_traceparent: migration 013).
         CASE WHEN r.status = 'DONE' THEN j.history ELSE ${appendAttempt({
           outcome: `CASE WHEN r.status IN ('QUEUED', 'WAITING') THEN CASE WHEN j.cancel_requested THEN 'cancelled' WHEN r.status = 'WAITING' THEN 'waiting'
                                                           WHEN r.release AND r.run_at IS NOT NULL THEN 'sleeping' WHEN r.release THEN 'released' ELSE 'retry' END
                         ELSE lower(r.status) END`,
           error: 'r.error',
           progress: `coalesce(r.progress -> 'value', j.progress)`,
           traceparent: 'r.trace',
         })} END AS history
       FROM skiplock.queue j JOIN results r ON j.id = r.id
       WHERE j.id = ANY (ARRAY(SELECT id FROM results))
         AND j.status = 'RUNNING' AND j.locked_by = coalesce(r.locked_by, $2) AND j.attempts = r.attempt
       FOR UPDATE OF j
     )`;

/**
 * completeAndClaim's write of any batch: $3 is the results as JSON (ResultRow), and each column's
 * new value is a CASE over the outcome; with `fanIn`, a child's end also reaches its parent.
 */
const GENERAL_WRITE = (fanIn: boolean) => `results AS MATERIALIZED (
       SELECT * FROM jsonb_to_recordset($3::jsonb)
         AS r(id bigint, attempt int, status text, result jsonb, error text, delay_ms bigint, release boolean, state jsonb, locked_by text,
              progress jsonb, trace text, run_at timestamptz, event_wait boolean)
     ),
     ${outcomeCte()},
     ${settleCtes({
       outcome: 'outcome', status: 'status',
       keep: { attempts: 'o.attempts', last_error: 'o.last_error', run_at: 'o.run_at', progress: 'o.progress', history: 'o.history' },
       end: {
         result: `CASE WHEN e.status = 'DONE' THEN e.result END`,
         finished_by: `CASE WHEN e.status = 'DONE' THEN e.locked_by END`, finished_traceparent: `CASE WHEN e.status = 'DONE' THEN e.trace END`,
       },
       returning: 'r.id, r.schedule_state, r.parent_step',
     })},
     -- Read by the answer before the claim runs, so the writes above are done by then: a limited
     -- claim (claim_limited_jobs) counts the key's RUNNING jobs after this batch left them.
     written AS (
       SELECT o.id, o.status, o.schedule_name, rec.schedule_state, o.result, o.last_error, o.parent_id, rec.parent_step
         FROM outcome o LEFT JOIN recorded rec ON rec.id = o.id
        WHERE o.id IN (SELECT id FROM kept UNION ALL SELECT id FROM gone)
     ),${fanIn ? `\n     ${fanInCtes('written')},` : ''}
     -- A schedule's recurring state, only with a result that was written (so fenced like it), and
     -- only if the state is still the one the job read when it fired (no lost update).
     schedule_state AS (
       UPDATE skiplock.schedule s SET state = nullif(r.state -> 'value', 'null'::jsonb)
       FROM written w JOIN results r ON r.id = w.id
       WHERE r.state IS NOT NULL AND r.status = 'DONE' AND s.name = w.schedule_name
         AND s.state IS NOT DISTINCT FROM w.schedule_state
     )`;

/**
 * completeAndClaim's write of the common batch: every result DONE, none with a schedule state, no
 * child's (no fan-in). Its results come as arrays in the order of the ids in $3 (appended to
 * `values`), and each row finds its own by array_position: no JSON parsed, no join, no CASE per
 * column. Writes what the general write writes for such a batch, with 9% less PostgreSQL CPU per
 * job in a bare loop and 13.5% less in a tick (A/B, docs/benchmarks.md, "Issue 23").
 */
function doneWrite(p: CompleteAndClaimParams, values: unknown[]): string {
  const param = (value: unknown) => `$${values.push(value)}`;
  const at = (array: string, alias: string) => `(${array})[array_position($3::bigint[], ${alias}.id)]`;
  // As the general write reads its JSON: a null or absent result is SQL NULL; a progress of null is
  // JSON null (it clears the last one), an absent one SQL NULL (keeps it).
  const json = (value: unknown) => (value === undefined ? null : (JSON.stringify(value) ?? null));
  const attempts = param(p.results.map((r) => r.attempt));
  const lockedBy = param(p.results.map((r) => r.locked_by ?? p.workerId));
  const results = param(p.results.map((r) => json(r.result ?? undefined)));
  const progress = param(p.results.map((r) => json(r.progress?.value)));
  const traces = param(p.results.map((r) => r.trace ?? null));
  return `ended AS (
       DELETE FROM skiplock.queue j
       WHERE j.id = ANY ($3::bigint[]) AND j.status = 'RUNNING'
         AND j.locked_by = ${at(`${lockedBy}::text[]`, 'j')} AND j.attempts = ${at(`${attempts}::int[]`, 'j')}
       RETURNING j.*
     ),
     written AS (
       ${recordEnd('ended', {
         status: `'DONE'`, result: at(`${results}::jsonb[]`, 'e'), finished_at: NOW,
         progress: `coalesce(${at(`${progress}::jsonb[]`, 'e')}, e.progress)`,
         finished_by: 'e.locked_by', finished_traceparent: at(`${traces}::text[]`, 'e'),
       }, 'r.id, r.status')}
     )`;
}

/**
 * What a claim returns of each job it took: the columns a Job needs that the claim did not set
 * itself (src/store/rows.ts mapClaimedJob fills in those: status, locked_by, updated_at, and the
 * ones a RUNNING job holds null), its times as epoch milliseconds (epochMs), and the flow keys the
 * statement's own STARTED reads. Not `j.*`: 37 columns, eight of them timestamps, were formatted by
 * PostgreSQL and parsed back by the driver for every job of every batch.
 */
const CLAIMED_COLUMNS = `j.id, j.task, j.priority, j.attempts, j.max_attempts, j.timeout_ms, j.cancel_requested, j.last_error,
         j.schedule_name, j.history, j.parent_id, j.pending_children, j.step_count, j.flow_key, j.rate_key, j.fair_key, j.batch_key, ${epochMs('j.run_at')} AS run_at_ms,
         ${epochMs('j.locked_until')} AS locked_until_ms, ${epochMs('j.created_at')} AS created_at_ms,
         ${epochMs('j.started_at')} AS started_at_ms`;
/** The claimed jobs' columns that only the record holds. */
const RECORD_COLUMNS = `r.payload, r.idempotency_key, r.schedule_state, r.traceparent, r.parent_step, ${epochMs('r.scheduled_for')} AS scheduled_for_ms`;

/** A ctx.sleep's result (a release with a wake instant) whose instant has not come: the job is WAITING. */
const SLEEPING = `(r.status = 'QUEUED' AND r.release AND r.run_at IS NOT NULL AND r.run_at > ${NOW})`;

/**
 * A WAITING result that is due at once instead: a wait completed while the job ran (wait_woken);
 * for ctx.invoke, no child left (by the counter, or by the step rows); for any wait, no step
 * still waiting. An event wait does not count children: pending_children may be 0 while it waits.
 */
const WOKEN = `(j.wait_woken OR (NOT coalesce(r.event_wait, false) AND j.pending_children <= 0) OR NOT EXISTS (
                              SELECT 1 FROM skiplock.job_step s WHERE s.job_id = j.id AND s.status = 'waiting'))`;

/** completeAndClaim's lease probe (probeLeases): some RUNNING job's lease has expired. */
const LEASE_EXPIRED = `EXISTS (SELECT 1 FROM skiplock.queue x WHERE x.status = 'RUNNING' AND x.locked_until < ${NOW})`;

/**
 * With a child's result in the batch: the claim skips the parent of a child this statement ends.
 * The child's fan-in updates that row, and a statement updates a row once (the count-down would be
 * lost, and the parent could wait for ever). A later claim takes it. (SQL comments are left out
 * of statements: they would be sent with every call and shipped in every bundle.)
 */
const NOT_A_PARENT_OF_WRITTEN = `
         AND j.id <> ALL (ARRAY(SELECT parent_id FROM written WHERE parent_id IS NOT NULL))`;

/** A task-name array parameter without the paused tasks (migration 011): no tick claims those. */
export const unpaused = (param: string) => `ARRAY(SELECT unnest(${param}::text[]) EXCEPT SELECT name FROM skiplock.paused_task)`;
/** A flow-limits parameter (a jsonb array of {task, ...}) without the paused tasks. */
export const unpausedLimits = (param: string) =>
  `(SELECT coalesce(jsonb_agg(e), '[]'::jsonb) FROM jsonb_array_elements(${param}::jsonb) e
     WHERE NOT EXISTS (SELECT 1 FROM skiplock.paused_task p WHERE p.name = e->>'task'))`;


/**
 * The claim of `lim` jobs of the tasks `tasks` (a parameter): the plain claim (migration 003: the
 * ordered scan of job_claim_idx, whatever the statistics say) — or, while the queue holds a fair
 * job, the fair claim (migration 023), which takes the levels' lanes in turn, the jobs without a key
 * being one of them. Which one is one probe of job_fair_due_idx, empty unless some job has a
 * fairness key; the function not chosen is not called (a one-time filter).
 */
const claimOf = (lim: string, tasks: string) => `SELECT id FROM skiplock.claimable_jobs(${lim}, ${NOW}, $5, ${unpaused(tasks)}) AS id WHERE NOT (SELECT fair FROM fair_queued)
       UNION ALL
       SELECT id FROM skiplock.claim_fair_jobs(${lim}, ${NOW}, $5, ${unpaused(tasks)}) AS id WHERE (SELECT fair FROM fair_queued)`;

const FAIR_QUEUED = `fair_queued AS MATERIALIZED (
       SELECT EXISTS (SELECT 1 FROM skiplock.queue WHERE status <> 'RUNNING' AND run_at IS NOT NULL AND fair_key IS NOT NULL
                         AND batch_key IS NULL AND flow_key IS NULL) AS fair
     )`;

/** The claim of `slots` jobs (SQL: $4, or what the batch claim left of it) without flow control. */
const claimPlain = (slots: string) => `${FAIR_QUEUED},
     next AS MATERIALIZED (
       ${claimOf(slots, '$8')}
     )`;

/**
 * With flow control: the limited tasks ($10, migration 015's claim_limited_jobs) first — bounded by
 * their limits, they cannot starve the others, and a backlog of plain jobs cannot starve them —
 * then the plain tasks ($11) in what is left of `limit`, by the plain claim, unchanged.
 */
const claimLimited = (slots: string) => `limited AS MATERIALIZED (
       SELECT job_id AS id, start_at FROM skiplock.claim_limited_jobs(${slots}::int, ${NOW}, $5, ${unpausedLimits('$10')})
     ),
     ${FAIR_QUEUED},
     plain AS MATERIALIZED (
       ${claimOf(`${slots}::int - (SELECT count(*)::int FROM limited)`, '$11')}
     ),
     next AS (SELECT id FROM limited UNION ALL SELECT id FROM plain)`;

/**
 * The rate-limit starts of the limited jobs the claim took (migration 015): recorded here, not by
 * claim_limited_jobs, so a job it picked that this statement's UPDATE could not take (one this
 * statement wrote, or one newer than its snapshot) costs no start. Before the commit that releases
 * the key's lock, so the next claim of the key counts them.
 */
const STARTED = `,
     started AS (
       INSERT INTO skiplock.flow_start (task, rate_key, started_at)
       SELECT c.task, c.rate_key, l.start_at FROM claimed c JOIN limited l ON l.id = c.id WHERE l.start_at IS NOT NULL
     )`;

/**
 * The attempt whose start a limited job's claim counted (migration 015): a resume of the same
 * attempt, which gives it back, is then claimed without a new start.
 */
const RATE_ATTEMPT = `,
         rate_attempt = CASE WHEN j.flow_key IS NOT NULL THEN j.attempts + 1 ELSE j.rate_attempt END`;
