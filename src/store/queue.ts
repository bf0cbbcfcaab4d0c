/**
 * The two tables of a job (migration 021, docs/architecture.md "The data model"), as SQL fragments
 * the statements share:
 *
 * - `skiplock.queue`: a row per live job (QUEUED, RUNNING, WAITING) holding its live state. The
 *   claim, the leases, the result write, flow control and the steps' fences write here only.
 * - `skiplock.job_record`: every job's record, written at enqueue (RECORD_INSERT) and when the job
 *   ends, by the statement that deletes its queue row (recordEnd). While the job is live the
 *   record's live columns are a placeholder nothing reads.
 * - `skiplock.job`: a view, the record with the queue's live columns laid over it, for reads.
 *
 * A job moves between them only in these ways: enqueue inserts both rows; an end deletes the queue
 * row and writes the record from it (one statement, so a reader sees the job live or ended, never
 * neither); a revival (a person's retry or restart, a dead parent's child that succeeded) inserts a
 * queue row from the record (queueFromRecord).
 *
 * Time: `$1` is always the clock (src/store/clock.ts).
 */
import { NOW } from './clock.ts';

/**
 * The live columns an end copies from the queue row into the record (the rest of the record is
 * immutable after enqueue, or written by the end itself: status, result, finished_*).
 */
export const COPIED_AT_END = [
  'priority', 'run_at', 'attempts', 'last_error', 'started_at', 'history', 'progress',
  'flow_key', 'rate_key', 'rate_attempt', 'pending_children', 'step_count',
] as const;

/**
 * `UPDATE skiplock.job_record …` ending the jobs of `from` (a CTE returning, per job, its queue
 * row as the end left it: `id` and COPIED_AT_END, plus the columns `set` reads), with `set`: the
 * end's own columns (status, finished_at, and what else it writes), which override the copy.
 * Each record is found by its primary key from the row of `from` (a nested loop over `from`): not
 * by `r.id = ANY (ARRAY(SELECT id FROM from))`, which the planner ran as a scan of the whole array
 * once per row of `from` (5,500 buffers for 100 jobs).
 */
export function recordEnd(from: string, set: Readonly<Record<string, string>> & { status: string }, returning = 'r.id'): string {
  const columns: Record<string, string> = {
    ...Object.fromEntries(COPIED_AT_END.map((c) => [c, `e.${c}`])),
    // A WAITING job with no wake instant has none in the queue; the record keeps its last.
    run_at: 'coalesce(e.run_at, r.run_at)',
    locked_by: 'NULL', locked_until: 'NULL', cancel_requested: 'false', wait_woken: 'false', debounce_key: 'NULL',
    updated_at: NOW,
    ...set,
  };
  // DEAD and CANCELLED are listed by failed_status (migration 021) and found in finish order by
  // failed_at (migration 025); a DONE end leaves both alone, so its UPDATE changes no column a btree
  // index names and can be HOT.
  if (set.status !== `'DONE'`) {
    columns.failed_status = `CASE WHEN (${set.status}) IN ('DEAD', 'CANCELLED') THEN (${set.status}) END`;
    columns.failed_at = `CASE WHEN (${set.status}) IN ('DEAD', 'CANCELLED') THEN (${columns.finished_at ?? 'NULL'}) END`;
  }
  return `UPDATE skiplock.job_record r SET
         ${Object.entries(columns).map(([c, v]) => `${c} = ${v}`).join(', ')}
       FROM ${from} e
       WHERE r.id = e.id
       RETURNING ${returning}`;
}

/** The queue's columns that an enqueue or a revival writes, in the order QUEUE_VALUES gives them. */
export const QUEUE_INSERT = `INSERT INTO skiplock.queue (id, task, status, priority, run_at, attempts, max_attempts, timeout_ms,
                                   created_at, updated_at, flow_key, rate_key, debounce_key, parent_id, cancel_on, schedule_name, fair_key, batch_key)`;

/**
 * `SELECT` of a new queue row per row of `from` (alias `x`: a record row as just inserted, or
 * returned by an INSERT into the record): QUEUED, with the record's own run_at and flow keys.
 */
export const queueRowsFrom = (from: string, debounceKey = 'NULL') =>
  `SELECT x.id, x.task, 'QUEUED', x.priority, x.run_at, 0, x.max_attempts, x.timeout_ms,
          x.created_at, x.updated_at, x.flow_key, x.rate_key, ${debounceKey}, x.parent_id, x.cancel_on, x.schedule_name, x.fair_key, x.batch_key
     FROM ${from} x`;

/** The live columns the queue lays over the record (the view skiplock.job, migration 021). */
const LIVE = new Set([
  'status', 'priority', 'run_at', 'attempts', 'locked_by', 'locked_until', 'cancel_requested', 'last_error', 'updated_at', 'started_at',
  'history', 'progress', 'flow_key', 'rate_key', 'rate_attempt', 'debounce_key', 'pending_children', 'step_count', 'wait_woken',
]);

/** Every column of a job row, in the view's order. */
export const JOB_ROW = [
  'id', 'task', 'payload', 'status', 'priority', 'run_at', 'attempts', 'max_attempts', 'timeout_ms', 'locked_by', 'locked_until',
  'cancel_requested', 'last_error', 'result', 'idempotency_key', 'schedule_name', 'scheduled_for', 'created_at', 'updated_at',
  'finished_at', 'schedule_state', 'started_at', 'history', 'progress', 'traceparent', 'flow_key', 'rate_key', 'debounce_key',
  'parent_id', 'parent_step', 'pending_children', 'step_count', 'finished_by', 'finished_traceparent', 'rate_attempt', 'wait_woken',
  'cancel_on', 'failed_status', 'fair_key', 'batch_key', 'failed_at',
] as const;

/** A job row (the view's columns) of a record just inserted, which holds a new job's whole state. */
export const recordJobColumns = (record: string) => JOB_ROW.map((c) => `${record}.${c}`).join(', ');

/**
 * A job row (the view's columns) from a record alias and a queue alias that is known to be the
 * job's queue row: what a statement that just wrote both answers, without reading the view.
 */
export const liveJobColumns = (record: string, queue: string) =>
  JOB_ROW.map((c) => (c === 'run_at' ? `coalesce(${queue}.run_at, ${record}.run_at) AS run_at` : LIVE.has(c) ? `${queue}.${c}` : `${record}.${c}`)).join(', ');

/** The queue's columns (migration 021). */
export const QUEUE_COLUMNS = [
  'id', 'task', 'status', 'priority', 'run_at', 'attempts', 'max_attempts', 'timeout_ms', 'locked_by', 'locked_until', 'cancel_requested',
  'last_error', 'created_at', 'updated_at', 'started_at', 'history', 'progress', 'flow_key', 'rate_key', 'rate_attempt', 'debounce_key',
  'parent_id', 'pending_children', 'step_count', 'wait_woken', 'cancel_on', 'schedule_name', 'fair_key', 'batch_key',
] as const;

/**
 * `INSERT INTO skiplock.queue …` reviving the jobs of `from` (alias `x`: their records, as a CTE
 * returning `*` of skiplock.job_record) as live again: the record's state, with `set` overriding
 * columns (status and attempts at least). A revived job holds no lease.
 */
export function queueFromRecord(from: string, set: Readonly<Record<string, string>>): string {
  const value = (c: string) =>
    set[c] ?? (c === 'locked_by' || c === 'locked_until' || c === 'debounce_key' ? 'NULL' : c === 'cancel_requested' || c === 'wait_woken' ? 'false' : `x.${c}`);
  return `INSERT INTO skiplock.queue (${QUEUE_COLUMNS.join(', ')})
       SELECT ${QUEUE_COLUMNS.map(value).join(', ')} FROM ${from} x`;
}

/**
 * The CTEs that carry out an outcome decided on locked queue rows: `outcome` names a CTE with each
 * job's `id` and its new status in column `status` (QUEUED or WAITING: still live; DONE, DEAD or
 * CANCELLED: ended). `kept` updates the live ones' queue rows with `keep` (SQL over alias `o`) and
 * lets go of their lease; `gone` deletes the ended ones' queue rows, and `recorded` writes their
 * records (recordEnd with `end` over alias `e`, answering `returning`). kept and gone answer the
 * ids they wrote. The result write (src/store/claim.ts), the reaper and the give-back of unseen
 * claims (src/store/leases.ts) end this way.
 */
export function settleCtes(p: { outcome: string; status: string; keep: Readonly<Record<string, string>>; end: Readonly<Record<string, string>>; returning: string }): string {
  const live = `${p.status} IN ('QUEUED', 'WAITING')`;
  const keep = { status: `o.${p.status}`, ...p.keep, locked_by: 'NULL', locked_until: 'NULL', cancel_requested: 'false', wait_woken: 'false', updated_at: NOW };
  return `kept AS (
       UPDATE skiplock.queue j SET ${Object.entries(keep).map(([c, v]) => `${c} = ${v}`).join(', ')}
         FROM ${p.outcome} o
        WHERE j.id = ANY (ARRAY(SELECT id FROM ${p.outcome} WHERE ${live})) AND j.id = o.id
       RETURNING j.id
     ),
     gone AS (
       DELETE FROM skiplock.queue j WHERE j.id = ANY (ARRAY(SELECT id FROM ${p.outcome} WHERE NOT (${live})))
       RETURNING j.id
     ),
     ended AS MATERIALIZED (SELECT * FROM ${p.outcome} WHERE NOT (${live})),
     recorded AS (
       ${recordEnd('ended', { status: `e.${p.status}`, finished_at: NOW, ...p.end }, p.returning)}
     )`;
}
