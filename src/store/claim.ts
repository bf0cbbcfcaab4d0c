/**
 * Every statement that reads or changes jobs. Each builder is pure and returns one Statement;
 * each state change is exactly one statement, so all of them work over Neon's HTTP driver.
 *
 * Time: `$1` is always the clock (src/store/clock.ts).
 */
import { MS, NOW, clock, epochMs, leaseUntil, type Clock } from './clock.ts';
import type { JobStatus } from '../core/types.ts';
import { appendAttempt } from './history.ts';
import type { NewJobRow } from './job-row.ts';
import { preparedStatement, statement, type Statement } from './sql.ts';
import { fanInCtes } from './steps.ts';
import { pendingEventsExist, registerTasksCte, subscriptionValues, type RegisteredTaskRow, type Subscriptions } from './events.ts';


/**
 * Inserts jobs; a job whose idempotency key already exists is returned instead (`inserted`
 * false), and nothing is written for it: `DO NOTHING`, not a no-op `DO UPDATE`, which wrote a new
 * row version (a dead tuple, an index entry per index) on every replay.
 *
 * The existing rows come from a second SELECT in the same statement, which reads the
 * statement's snapshot: a key committed by a concurrent transaction after that snapshot was taken
 * (this insert waited for it, then did nothing) is in neither half of the answer. The caller
 * reads such keys again with jobsByIdempotencyKey, a new statement with a new snapshot.
 */
export function insertJobs(params: { jobs: readonly NewJobRow[]; now: Clock }): Statement {
  if (params.jobs.length === 1) return insertOneJob(params.jobs[0]!, params.now);
  return preparedStatement(
    `WITH input AS MATERIALIZED (
       SELECT * FROM jsonb_to_recordset($2::jsonb) AS i(
         ord int, task text, payload jsonb, priority smallint, run_at timestamptz, delay_ms bigint,
         max_attempts int, timeout_ms int, idempotency_key text, schedule_name text, scheduled_for timestamptz,
         traceparent text, flow_key text, rate_key text, cancel_on text[])
     ),
     ${insertedOrHeld(
       `SELECT task, payload, priority, coalesce(run_at, ${NOW} + delay_ms ${MS}), max_attempts, timeout_ms,
              idempotency_key, schedule_name, scheduled_for, flow_key, rate_key, cancel_on, ${NOW}, ${NOW}, traceparent
         FROM input ORDER BY ord`,
       'j.idempotency_key = ANY (ARRAY(SELECT idempotency_key FROM input WHERE idempotency_key IS NOT NULL))',
     )}`,
    [clock(params.now), JSON.stringify(params.jobs.map((job, ord) => ({ ord, ...job })))],
  );
}

/**
 * insertJobs of one job, the enqueue a route sends: its fields as parameters rather than a JSON
 * array read by jsonb_to_recordset, and without a key, a plain INSERT. The same row and the same
 * answer; PostgreSQL spends 303 µs of CPU on the batch statement with one job, and 153 on this one
 * (docs/benchmarks.md, "The enqueue").
 */
function insertOneJob(job: NewJobRow, now: Clock): Statement {
  const row = `VALUES ($2, $3::jsonb, $4::smallint, coalesce($5::timestamptz, ${NOW} + $6::bigint ${MS}), $7::int, $8::int,
               $9::text, $10::text, $11::timestamptz, $12::text, $13::text, $14::text[], ${NOW}, ${NOW}, $15::text)`;
  return preparedStatement(
    job.idempotency_key === null ? `${INSERT_JOB}\n       ${row}\n       RETURNING j.*, true AS inserted` : `WITH ${insertedOrHeld(row, 'j.idempotency_key = $9::text')}`,
    [
      clock(now), job.task, JSON.stringify(job.payload), job.priority, job.run_at, job.delay_ms, job.max_attempts, job.timeout_ms,
      job.idempotency_key, job.schedule_name, job.scheduled_for, job.flow_key ?? null, job.rate_key ?? null, job.cancel_on ?? null, job.traceparent ?? null,
    ],
  );
}

/** The columns an enqueue writes, in the order both statements above give their values. */
const INSERT_JOB = `INSERT INTO skiplock.job AS j (task, payload, priority, run_at, max_attempts, timeout_ms,
                                      idempotency_key, schedule_name, scheduled_for, flow_key, rate_key, cancel_on, created_at, updated_at, traceparent)`;

/**
 * The CTE `inserted` writing `rows` except those whose idempotency key is taken, and the answer:
 * what it wrote (`inserted` true) and the jobs already holding the keys `held` matches (false).
 */
const insertedOrHeld = (rows: string, held: string) => `inserted AS (
       ${INSERT_JOB}
       ${rows}
       ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
       RETURNING j.*
     )
     SELECT i.*, true AS inserted FROM inserted i
     UNION ALL
     -- Rows the INSERT wrote are invisible here (one snapshot): this half holds only older jobs.
     SELECT j.*, false AS inserted FROM skiplock.job j WHERE ${held} AND j.idempotency_key IS NOT NULL`;

export interface DebouncedJobRow extends Omit<NewJobRow, 'run_at' | 'idempotency_key' | 'schedule_name' | 'scheduled_for'> {
  debounce_key: string;
  /** Longest a job is pushed back: it runs at most this long after the first enqueue. Null: no limit. */
  max_delay_ms: number | null;
  /** 'first' keeps the queued job's payload; 'last' replaces it. */
  keep: 'first' | 'last';
}

/**
 * A debounced enqueue, in one statement: inserts the job, or — while a job of the same task and
 * debounce key is QUEUED and unclaimed (job_debounce_idx, migration 011) — updates that one
 * instead: due delay_ms from now, but never later than max_delay_ms after its first enqueue
 * (its created_at); payload replaced for keep 'last', with the flow keys computed from it. Concurrent enqueues with one key serialise
 * on the index entry (ON CONFLICT), so they make one job. Returns the row, `inserted` true when new.
 */
export function upsertDebouncedJob(p: { job: DebouncedJobRow; now: Clock }): Statement {
  const j = p.job;
  return statement(
    `INSERT INTO skiplock.job AS j (task, payload, priority, run_at, max_attempts, timeout_ms, debounce_key, created_at, updated_at, traceparent, flow_key, rate_key, cancel_on)
     VALUES ($2, $3::jsonb, $4, ${NOW} + least($5::bigint, coalesce($6::bigint, $5::bigint)) ${MS}, $7, $8, $9, ${NOW}, ${NOW}, $11, $12, $13, $14::text[])
     ON CONFLICT (task, debounce_key) WHERE status = 'QUEUED' AND debounce_key IS NOT NULL DO UPDATE SET
       payload = CASE WHEN $10::text = 'first' THEN j.payload ELSE excluded.payload END,
       flow_key = CASE WHEN $10::text = 'first' THEN j.flow_key ELSE excluded.flow_key END,
       rate_key = CASE WHEN $10::text = 'first' THEN j.rate_key ELSE excluded.rate_key END,
       run_at = least(${NOW} + $5::bigint ${MS}, coalesce(j.created_at + $6::bigint ${MS}, 'infinity')),
       updated_at = ${NOW}
     RETURNING j.*, (j.xmax = 0) AS inserted`,
    [clock(p.now), j.task, JSON.stringify(j.payload), j.priority, j.delay_ms, j.max_delay_ms, j.max_attempts, j.timeout_ms, j.debounce_key, j.keep, j.traceparent ?? null, j.flow_key ?? null, j.rate_key ?? null, j.cancel_on ?? null],
  );
}

/** The jobs holding these idempotency keys (insertJobs' second look, after a concurrent insert). */
export function jobsByIdempotencyKey(p: { keys: readonly string[] }): Statement {
  return statement(
    `SELECT j.*, false AS inserted FROM skiplock.job j WHERE j.idempotency_key = ANY ($1::text[]) AND j.idempotency_key IS NOT NULL`,
    [p.keys],
  );
}

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
}

/** One limited task as skiplock.claim_limited_jobs reads it (src/runtime/flow-key.ts builds them). */
export interface FlowLimitRow {
  task: string;
  /** Concurrency per flow_key. */
  limit?: number;
  /** Concurrency over all keys. */
  global?: number;
  /** Starts per period_ms per rate_key. */
  rate?: number;
  period_ms?: number;
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
 */
export function completeAndClaim(p: CompleteAndClaimParams): Statement {
  const limited = (p.flowLimits?.length ?? 0) > 0;
  const limitedNames = new Set(p.flowLimits?.map((l) => l.task));
  const plainDone = !p.fanIn && p.results.every((r) => r.status === 'DONE' && r.state === undefined);
  const values: unknown[] = [
    clock(p.now), p.workerId, plainDone ? p.results.map((r) => r.id) : JSON.stringify(p.results), p.limit, p.budgetMs, p.leaseMs, p.leaseGraceMs,
    p.tasks, p.staticSchedules ?? null, ...(limited ? [JSON.stringify(p.flowLimits), p.tasks.filter((t) => !limitedNames.has(t))] : []),
  ];
  const register = p.register && p.register.length > 0 ? `,\n     ${registerTasksCte(`$${values.push(JSON.stringify(p.register))}`)}` : '';
  const eventsDue = p.subscriptions ? pendingEventsExist(...(subscriptionValues(p.subscriptions).map((v) => `$${values.push(v)}`) as [string, string, string])) : 'NULL::boolean';
  // Not prepared when it asks about pending events or registers (at most every reapIntervalMs):
  // a prepared statement's generic plan cannot estimate `task = ANY ($n)` and scanned every pending
  // row (11 ms past 20,000 left for a task no deployment runs); planned each time, it is an index probe.
  const build = p.subscriptions || register ? statement : preparedStatement;
  return build(
    `WITH ${plainDone ? doneWrite(p, values) : GENERAL_WRITE(p.fanIn === true)},
     ${limited ? CLAIM_LIMITED : CLAIM_PLAIN},
     claimed AS (
       UPDATE skiplock.job j SET
         status = 'RUNNING', attempts = j.attempts + 1, locked_by = $2,
         locked_until = ${leaseUntil('$7', '$6')}, updated_at = ${NOW},
         started_at = ${NOW}, progress = NULL, debounce_key = NULL${limited ? RATE_ATTEMPT : ''}
       WHERE j.id = ANY (ARRAY(SELECT id FROM next))${p.fanIn ? NOT_A_PARENT_OF_WRITTEN : ''}
       RETURNING ${CLAIMED_COLUMNS}
     )${limited ? STARTED : ''}${register}
     SELECT w.written, w.cancelled, w.schedule_due, w.reap_due, w.events_due, claimed.*
       FROM (SELECT coalesce(jsonb_agg(id::text), '[]'::jsonb) AS written,
                    coalesce(jsonb_agg(id::text) FILTER (WHERE status = 'CANCELLED'), '[]'::jsonb) AS cancelled,
                    -- Two probes of schedule_due_idx (next_run_at, enabled): a few rows at most.
                    ($9::text[] IS NOT NULL AND (
                       EXISTS (SELECT 1 FROM skiplock.schedule s WHERE s.enabled AND s.next_run_at <= ${NOW}
                                  AND (s.source = 'dynamic' OR s.name = ANY ($9::text[])) AND s.task = ANY ($8::text[]))
                    OR EXISTS (SELECT 1 FROM skiplock.schedule s WHERE s.enabled AND s.next_run_at IS NULL
                                  AND (s.source = 'dynamic' OR s.name = ANY ($9::text[])) AND s.task = ANY ($8::text[])))) AS schedule_due,
                    ${p.probeLeases ? LEASE_EXPIRED : 'NULL::boolean'} AS reap_due,
                    ${eventsDue} AS events_due
               FROM written) AS w
       FULL JOIN claimed ON false`,
    values,
  );
}

/**
 * completeAndClaim's write of any batch: $3 is the results as JSON (ResultRow), and each column's
 * new value is a CASE over the outcome; with `fanIn`, a child's end also reaches its parent.
 */
const GENERAL_WRITE = (fanIn: boolean) => `results AS MATERIALIZED (
       SELECT * FROM jsonb_to_recordset($3::jsonb)
         AS r(id bigint, attempt int, status text, result jsonb, error text, delay_ms bigint, release boolean, state jsonb, locked_by text,
              progress jsonb, trace text, run_at timestamptz, event_wait boolean)
     ),
     -- A retry or a release of a job whose cancel was asked while it ran ends CANCELLED (the
     -- attempt is kept: it ran); a cancel must not be dropped because the attempt failed.
     written AS (
       UPDATE skiplock.job j SET
         -- WAITING (ctx.invoke): QUEUED at once when the children ended before this write (their
         -- ends only counted down: this row was RUNNING then), by the counter or by the step rows.
         -- An event or callback wait (migration 016): QUEUED at once when one of its waits was
         -- completed while it ran (wait_woken, read from this row: a completion committing now is
         -- seen); a timed wait is QUEUED until its timeout (run_at), like a sleep.
         status = CASE WHEN r.status IN ('QUEUED', 'WAITING') AND j.cancel_requested THEN 'CANCELLED'
                       WHEN r.status = 'WAITING' AND ${WOKEN} THEN 'QUEUED'
                       WHEN r.status = 'WAITING' AND r.run_at IS NOT NULL THEN 'QUEUED'
                       ELSE r.status END,
         attempts = CASE WHEN r.release AND NOT j.cancel_requested THEN j.attempts - 1 ELSE j.attempts END,
         result = CASE WHEN r.status = 'DONE' THEN r.result END,
         last_error = coalesce(r.error, j.last_error),
         run_at = CASE WHEN r.status IN ('QUEUED', 'WAITING') AND NOT j.cancel_requested
                       THEN CASE WHEN r.status = 'WAITING' AND ${WOKEN} THEN ${NOW} ELSE coalesce(r.run_at, ${NOW} + r.delay_ms ${MS}) END
                       ELSE j.run_at END,
         finished_at = CASE WHEN r.status IN ('QUEUED', 'WAITING') AND NOT j.cancel_requested THEN NULL ELSE ${NOW} END,
         locked_by = NULL, locked_until = NULL, cancel_requested = false, wait_woken = false, updated_at = ${NOW},
         progress = coalesce(r.progress -> 'value', j.progress),
         -- A DONE attempt is read from the row (finished_by, finished_traceparent: migration 013),
         -- not appended: building the entry was a sixth of this statement's time, once per job.
         finished_by = CASE WHEN r.status = 'DONE' THEN j.locked_by END,
         finished_traceparent = CASE WHEN r.status = 'DONE' THEN r.trace END,
         -- src/store/history.ts: any other attempt's entry, by the statement that writes its outcome
         history = CASE WHEN r.status = 'DONE' THEN j.history ELSE ${appendAttempt({
           outcome: `CASE WHEN r.status IN ('QUEUED', 'WAITING') THEN CASE WHEN j.cancel_requested THEN 'cancelled' WHEN r.status = 'WAITING' THEN 'waiting'
                                                           WHEN r.release AND r.run_at IS NOT NULL THEN 'sleeping' WHEN r.release THEN 'released' ELSE 'retry' END
                         ELSE lower(r.status) END`,
           error: 'r.error',
           progress: `coalesce(r.progress -> 'value', j.progress)`,
           traceparent: 'r.trace',
         })} END
       FROM results r
       WHERE j.id = ANY (ARRAY(SELECT id FROM results)) AND j.id = r.id
         AND j.status = 'RUNNING' AND j.locked_by = coalesce(r.locked_by, $2) AND j.attempts = r.attempt
       RETURNING j.id, j.status, j.schedule_name, j.schedule_state${fanIn ? ', j.result, j.last_error, j.parent_id, j.parent_step' : ''}
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
  const at = (array: string) => `(${array})[array_position($3::bigint[], j.id)]`;
  // As the general write reads its JSON: a null or absent result is SQL NULL; a progress of null is
  // JSON null (it clears the last one), an absent one SQL NULL (keeps it).
  const json = (value: unknown) => (value === undefined ? null : (JSON.stringify(value) ?? null));
  const attempts = param(p.results.map((r) => r.attempt));
  const lockedBy = param(p.results.map((r) => r.locked_by ?? p.workerId));
  const results = param(p.results.map((r) => json(r.result ?? undefined)));
  const progress = param(p.results.map((r) => json(r.progress?.value)));
  const traces = param(p.results.map((r) => r.trace ?? null));
  return `written AS (
       UPDATE skiplock.job j SET
         status = 'DONE', result = ${at(`${results}::jsonb[]`)}, finished_at = ${NOW},
         locked_by = NULL, locked_until = NULL, cancel_requested = false, wait_woken = false, updated_at = ${NOW},
         progress = coalesce(${at(`${progress}::jsonb[]`)}, j.progress),
         finished_by = j.locked_by, finished_traceparent = ${at(`${traces}::text[]`)}
       WHERE j.id = ANY ($3::bigint[]) AND j.status = 'RUNNING'
         AND j.locked_by = ${at(`${lockedBy}::text[]`)} AND j.attempts = ${at(`${attempts}::int[]`)}
       RETURNING j.id, j.status
     )`;
}

/**
 * What a claim returns of each job it took: the columns a Job needs that the claim did not set
 * itself (src/store/rows.ts mapClaimedJob fills in those: status, locked_by, updated_at, and the
 * ones a RUNNING job holds null), its times as epoch milliseconds (epochMs), and the flow keys the
 * statement's own STARTED reads. Not `j.*`: 37 columns, eight of them timestamps, were formatted by
 * PostgreSQL and parsed back by the driver for every job of every batch.
 */
const CLAIMED_COLUMNS = `j.id, j.task, j.payload, j.priority, j.attempts, j.max_attempts, j.timeout_ms, j.cancel_requested, j.last_error,
         j.idempotency_key, j.schedule_name, j.schedule_state, j.history, j.traceparent, j.parent_id, j.parent_step,
         j.pending_children, j.step_count, j.flow_key, j.rate_key, ${epochMs('j.run_at')} AS run_at_ms,
         ${epochMs('j.locked_until')} AS locked_until_ms, ${epochMs('j.created_at')} AS created_at_ms,
         ${epochMs('j.started_at')} AS started_at_ms, ${epochMs('j.scheduled_for')} AS scheduled_for_ms`;

/**
 * A WAITING result that is due at once instead: a wait completed while the job ran (wait_woken);
 * for ctx.invoke, no child left (by the counter, or by the step rows); for any wait, no step
 * still waiting. An event wait does not count children: pending_children may be 0 while it waits.
 */
const WOKEN = `(j.wait_woken OR (NOT coalesce(r.event_wait, false) AND j.pending_children <= 0) OR NOT EXISTS (
                              SELECT 1 FROM skiplock.job_step s WHERE s.job_id = j.id AND s.status = 'waiting'))`;

/** completeAndClaim's lease probe (probeLeases): some RUNNING job's lease has expired. */
const LEASE_EXPIRED = `EXISTS (SELECT 1 FROM skiplock.job x WHERE x.status = 'RUNNING' AND x.locked_until < ${NOW})`;

/**
 * With a child's result in the batch: the claim skips the parent of a child this statement ends.
 * The child's fan-in updates that row, and a statement updates a row once (the count-down would be
 * lost, and the parent could wait for ever). A later claim takes it. (SQL comments are left out
 * of statements: they would be sent with every call and shipped in every bundle.)
 */
const NOT_A_PARENT_OF_WRITTEN = `
         AND j.id <> ALL (ARRAY(SELECT parent_id FROM written WHERE parent_id IS NOT NULL))`;

/** migrations/003_claim_plan.sql: the ordered scan of job_claim_idx, whatever the statistics say. */
/** A task-name array parameter without the paused tasks (migration 011): no tick claims those. */
export const unpaused = (param: string) => `ARRAY(SELECT unnest(${param}::text[]) EXCEPT SELECT name FROM skiplock.paused_task)`;
/** A flow-limits parameter (a jsonb array of {task, ...}) without the paused tasks. */
export const unpausedLimits = (param: string) =>
  `(SELECT coalesce(jsonb_agg(e), '[]'::jsonb) FROM jsonb_array_elements(${param}::jsonb) e
     WHERE NOT EXISTS (SELECT 1 FROM skiplock.paused_task p WHERE p.name = e->>'task'))`;

const CLAIM_PLAIN = `next AS MATERIALIZED (
       -- migrations/003_claim_plan.sql: the ordered scan of job_claim_idx, whatever the statistics say
       SELECT id FROM skiplock.claimable_jobs($4, ${NOW}, $5, ${unpaused('$8')}) AS id
     )`;

/**
 * With flow control: the limited tasks ($10, migration 015's claim_limited_jobs) first — bounded by
 * their limits, they cannot starve the others, and a backlog of plain jobs cannot starve them —
 * then the plain tasks ($11) in what is left of `limit`, by the plain claim, unchanged.
 */
const CLAIM_LIMITED = `limited AS MATERIALIZED (
       SELECT job_id AS id, start_at FROM skiplock.claim_limited_jobs($4::int, ${NOW}, $5, ${unpausedLimits('$10')})
     ),
     plain AS MATERIALIZED (
       SELECT id FROM skiplock.claimable_jobs($4::int - (SELECT count(*)::int FROM limited), ${NOW}, $5, ${unpaused('$11')}) AS id
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

/**
 * After a claiming statement failed (it may have committed with its answer lost): gives back the
 * jobs this worker holds but never saw, as a release does (QUEUED, due now, the attempt given
 * back; CANCELLED if a cancel was asked). Left alone they would wait for the reaper, which spends
 * the attempt of a job that never ran. `known` are the jobs the tick holds and knows of (running,
 * or with a result still to write). The worker's jobs are those whose locked_by is `workerId`
 * or `workerId#<claim number>`. Not a parent whose child is given back here too: a cancelled
 * child's fan-in updates its parent, and a statement updates a row once; the next give-back or the
 * reaper takes it.
 */
export function releaseUnseenClaims(p: { now: Clock; workerId: string; known: readonly string[] }): Statement {
  return statement(
    `WITH released AS (
       UPDATE skiplock.job j SET
         status = CASE WHEN j.cancel_requested THEN 'CANCELLED' ELSE 'QUEUED' END,
         attempts = CASE WHEN j.cancel_requested THEN j.attempts ELSE j.attempts - 1 END,
         run_at = CASE WHEN j.cancel_requested THEN j.run_at ELSE ${NOW} END,
         finished_at = CASE WHEN j.cancel_requested THEN ${NOW} END,
         history = ${appendAttempt({
           outcome: `CASE WHEN j.cancel_requested THEN 'cancelled' ELSE 'released' END`,
           error: `'claimed by a statement whose answer was lost: given back before it ran'`,
         })},
         locked_by = NULL, locked_until = NULL, cancel_requested = false, updated_at = ${NOW}
       WHERE j.status = 'RUNNING' AND (j.locked_by = $2 OR starts_with(j.locked_by, $2 || '#')) AND NOT (j.id = ANY ($3::bigint[]))
         AND NOT EXISTS (SELECT 1 FROM skiplock.job c WHERE c.parent_id = j.id AND c.status = 'RUNNING'
                            AND (c.locked_by = $2 OR starts_with(c.locked_by, $2 || '#')) AND NOT (c.id = ANY ($3::bigint[])))
       RETURNING j.id, j.status, j.result, j.last_error, j.parent_id, j.parent_step
     ),
     -- A child cancelled here reaches its parent (src/store/steps.ts).
     ${fanInCtes('released')}
     SELECT id::text AS id FROM released`,
    [clock(p.now), p.workerId, p.known],
  );
}

/**
 * Extends the leases of jobs this worker still holds. Returns the ones it holds (id and
 * locked_by: which claim of the job), with their cancel flag; a job missing from the answer was
 * reaped or reclaimed, so its handler must stop.
 */
export function extendLeases(p: {
  now: Clock;
  workerId: string;
  /** Each with the locked_by its claim wrote (default `workerId`), and `progress`: what the handler reported since the last write (ctx.progress), carried by the heartbeat. */
  jobs: readonly { id: string; attempt: number; locked_by?: string; progress?: { value: unknown } | undefined }[];
  leaseMs: number;
  leaseGraceMs: number;
}): Statement {
  return preparedStatement(
    `WITH held AS MATERIALIZED (SELECT * FROM jsonb_to_recordset($3::jsonb) AS r(id bigint, attempt int, locked_by text, progress jsonb))
     UPDATE skiplock.job j SET
       locked_until = greatest(j.locked_until, ${leaseUntil('$5', '$4')}),
       updated_at = ${NOW},
       progress = coalesce(r.progress -> 'value', j.progress)
     FROM held r
     -- By primary key, as completeAndClaim finds its rows: never a join the planner may turn into a scan.
     WHERE j.id = ANY (ARRAY(SELECT id FROM held)) AND j.id = r.id
       AND j.status = 'RUNNING' AND j.locked_by = coalesce(r.locked_by, $2) AND j.attempts = r.attempt
     RETURNING j.id::text AS id, j.locked_by, j.cancel_requested`,
    [clock(p.now), p.workerId, JSON.stringify(p.jobs), p.leaseMs, p.leaseGraceMs],
  );
}

/**
 * The reaper: RUNNING jobs whose lease expired go back to QUEUED, due now; to DEAD when their
 * attempts are exhausted; to CANCELLED when a cancel was requested. Durable jobs are reaped like
 * any other: their completed steps are stored, so the next run skips them. Not a parent whose
 * child is reaped in the same statement: the child's fan-in updates the parent's row, and a
 * statement updates a row once (the count-down would be lost); the next reap takes it.
 */
export function reapExpiredLeases(p: { now: Clock; limit: number }): Statement {
  return statement(
    `WITH locked AS MATERIALIZED (
       SELECT id, parent_id FROM skiplock.job
        WHERE status = 'RUNNING' AND locked_until < ${NOW}
        ORDER BY locked_until
        LIMIT $2
        FOR UPDATE SKIP LOCKED
     ),
     expired AS (
       SELECT id FROM locked l WHERE NOT EXISTS (SELECT 1 FROM locked c WHERE c.parent_id = l.id)
     ),
     reaped AS (
       UPDATE skiplock.job j SET
         status = CASE WHEN j.cancel_requested THEN 'CANCELLED'
                       WHEN j.attempts >= j.max_attempts THEN 'DEAD'
                       ELSE 'QUEUED' END,
         finished_at = CASE WHEN j.cancel_requested OR j.attempts >= j.max_attempts THEN ${NOW} END,
         last_error = 'lease expired on attempt ' || j.attempts || ' (worker ' || j.locked_by || ' stopped responding)',
         history = ${appendAttempt({
           outcome: `'lease-lost'`,
           error: `'lease expired on attempt ' || j.attempts || ' (worker ' || j.locked_by || ' stopped responding)'`,
         })},
         run_at = CASE WHEN j.cancel_requested OR j.attempts >= j.max_attempts THEN j.run_at ELSE ${NOW} END,
         locked_by = NULL, locked_until = NULL, cancel_requested = false, updated_at = ${NOW}
       FROM expired WHERE j.id = expired.id
       RETURNING j.id, j.status, j.result, j.last_error, j.parent_id, j.parent_step
     ),
     -- A child that ends DEAD or CANCELLED here reaches its parent (src/store/steps.ts). The reaper
     -- never sees WAITING jobs: they hold no lease.
     ${fanInCtes('reaped')}
     SELECT count(*)::int AS reaped, count(*) FILTER (WHERE status = 'DEAD')::int AS dead FROM reaped`,
    [clock(p.now), p.limit],
  );
}

export interface RetentionParams {
  now: Clock;
  /** DONE jobs older than this are deleted. */
  doneMs: number;
  /** CANCELLED jobs older than this are deleted. */
  cancelledMs: number;
  /** DEAD jobs older than this are deleted; null keeps them until a person acts. */
  deadMs: number | null;
  limit: number;
  /** Events (migration 016) stored longer ago than this are deleted too, by the same statement (`limit` of them at most). Absent: none. */
  eventsMs?: number;
}

/**
 * Retention: deletes finished jobs past their age, oldest first, at most `limit` at a time. Every
 * tick runs it (at most once a minute per process), so it must cost nothing when there is nothing
 * to delete: the first condition bounds the scan of job_finished_idx to rows older than the
 * shortest retention, whatever the planner makes of the OR below (0.2 ms with a million recent
 * DONE rows and a thousand old DEAD ones).
 */
export function pruneFinishedJobs(p: RetentionParams): Statement {
  return statement(
    `WITH doomed AS MATERIALIZED (
       SELECT id FROM skiplock.job
        WHERE finished_at < ${NOW} - least($2::bigint, $3::bigint, coalesce($4::bigint, $2::bigint)) ${MS}
          AND (   (status = 'DONE' AND finished_at < ${NOW} - $2 ${MS})
               OR (status = 'CANCELLED' AND finished_at < ${NOW} - $3 ${MS})
               OR (status = 'DEAD' AND $4::bigint IS NOT NULL AND finished_at < ${NOW} - $4 ${MS}))
        ORDER BY finished_at
        LIMIT $5
        FOR UPDATE SKIP LOCKED
     ),
     deleted AS (DELETE FROM skiplock.job j USING doomed WHERE j.id = doomed.id RETURNING 1)${p.eventsMs === undefined ? '' : `,
     -- Events past their retention (event_created_idx): the retention pass stays one statement.
     old_events AS MATERIALIZED (SELECT id FROM skiplock.event WHERE created_at < ${NOW} - $6::bigint ${MS} ORDER BY created_at LIMIT $5),
     deleted_events AS (DELETE FROM skiplock.event e USING old_events o WHERE e.id = o.id RETURNING 1)`}
     SELECT count(*)::int AS deleted${p.eventsMs === undefined ? '' : ', (SELECT count(*)::int FROM deleted_events) AS deleted_events'} FROM deleted`,
    [clock(p.now), p.doneMs, p.cancelledMs, p.deadMs, p.limit, ...(p.eventsMs === undefined ? [] : [p.eventsMs])],
  );
}

export function getJob(p: { id: string }): Statement {
  return statement(`SELECT * FROM skiplock.job WHERE id = $1::bigint`, [p.id]);
}
