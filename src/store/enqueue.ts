/**
 * The enqueue's statements: insert jobs (idempotency keys honoured, nothing written for a replay),
 * the debounced enqueue, and the second look at keys a concurrent insert took. Each is one
 * statement, so all of them work over Neon's HTTP driver.
 *
 * Time: `$1` is always the clock (src/store/clock.ts).
 */
import { MS, NOW, clock, type Clock } from './clock.ts';
import type { NewJobRow } from './job-row.ts';
import { QUEUE_INSERT, liveJobColumns, queueRowsFrom, recordJobColumns } from './queue.ts';
import { preparedStatement, statement, type Statement } from './sql.ts';

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
         traceparent text, flow_key text, rate_key text, fair_key text, batch_key text, cancel_on text[])
     ),
     ${insertedOrHeld(
       `SELECT task, payload, priority, coalesce(run_at, ${NOW} + delay_ms ${MS}), max_attempts, timeout_ms,
              idempotency_key, schedule_name, scheduled_for, flow_key, rate_key, fair_key, batch_key, cancel_on, ${NOW}, ${NOW}, traceparent
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
               $9::text, $10::text, $11::timestamptz, $12::text, $13::text, $16::text, $17::text, $14::text[], ${NOW}, ${NOW}, $15::text)`;
  return preparedStatement(
    job.idempotency_key === null
      ? `WITH inserted AS (
       ${INSERT_JOB}
       ${row}
       RETURNING j.*
     ),
     ${QUEUED}
     SELECT i.*, true AS inserted FROM inserted i`
      : `WITH ${insertedOrHeld(row, 'j.idempotency_key = $9::text')}`,
    [
      clock(now), job.task, JSON.stringify(job.payload), job.priority, job.run_at, job.delay_ms, job.max_attempts, job.timeout_ms,
      job.idempotency_key, job.schedule_name, job.scheduled_for, job.flow_key ?? null, job.rate_key ?? null, job.cancel_on ?? null, job.traceparent ?? null,
      job.fair_key ?? null, job.batch_key ?? null,
    ],
  );
}

/** The columns an enqueue writes into the record, in the order both statements above give their values. */
const INSERT_JOB = `INSERT INTO skiplock.job_record AS j (task, payload, priority, run_at, max_attempts, timeout_ms,
                                      idempotency_key, schedule_name, scheduled_for, flow_key, rate_key, fair_key, batch_key, cancel_on, created_at, updated_at, traceparent)`;

/** The queue rows of the records a CTE `inserted` wrote (the records hold the live state a new job starts with). */
const QUEUED = `queued AS (
       ${QUEUE_INSERT}
       ${queueRowsFrom('inserted')}
     )`;

/**
 * The CTE `inserted` writing `rows` except those whose idempotency key is taken (into the record,
 * where the key is unique, then their queue rows), and the answer: what it wrote (`inserted` true)
 * and the jobs already holding the keys `held` matches (false), as the view reads them.
 */
const insertedOrHeld = (rows: string, held: string) => `inserted AS (
       ${INSERT_JOB}
       ${rows}
       ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
       RETURNING j.*
     ),
     ${QUEUED}
     SELECT ${recordJobColumns('i')}, true AS inserted FROM inserted i
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
    `WITH live AS (
       INSERT INTO skiplock.queue AS q (id, task, status, priority, run_at, attempts, max_attempts, timeout_ms, created_at, updated_at,
                                        flow_key, rate_key, fair_key, batch_key, debounce_key, cancel_on)
       VALUES (nextval(pg_get_serial_sequence('skiplock.job_record', 'id')), $2, 'QUEUED', $4,
               ${NOW} + least($5::bigint, coalesce($6::bigint, $5::bigint)) ${MS}, 0, $7, $8, ${NOW}, ${NOW}, $12, $13, $15, $16, $9, $14::text[])
       ON CONFLICT (task, debounce_key) WHERE status = 'QUEUED' AND debounce_key IS NOT NULL DO UPDATE SET
         flow_key = CASE WHEN $10::text = 'first' THEN q.flow_key ELSE excluded.flow_key END,
         rate_key = CASE WHEN $10::text = 'first' THEN q.rate_key ELSE excluded.rate_key END,
         fair_key = CASE WHEN $10::text = 'first' THEN q.fair_key ELSE excluded.fair_key END,
         batch_key = CASE WHEN $10::text = 'first' THEN q.batch_key ELSE excluded.batch_key END,
         run_at = least(${NOW} + $5::bigint ${MS}, coalesce(q.created_at + $6::bigint ${MS}, 'infinity')),
         updated_at = ${NOW}
       RETURNING q.*, (q.xmax = 0) AS inserted
     ),
     -- A new job's record, under the id its queue row drew (a conflict wastes a sequence value).
     created AS (
       INSERT INTO skiplock.job_record AS j
              (id, task, payload, priority, run_at, max_attempts, timeout_ms, created_at, updated_at, traceparent, flow_key, rate_key, fair_key, batch_key, cancel_on)
       OVERRIDING SYSTEM VALUE
       SELECT l.id, l.task, $3::jsonb, l.priority, l.run_at, l.max_attempts, l.timeout_ms, l.created_at, l.updated_at, $11, l.flow_key, l.rate_key, l.fair_key, l.batch_key, l.cancel_on
         FROM live l WHERE l.inserted
       RETURNING j.*
     ),
     -- keep 'last': the queued job's payload is replaced (its flow keys were, on the queue row).
     replaced AS (
       UPDATE skiplock.job_record j SET payload = $3::jsonb, flow_key = l.flow_key, rate_key = l.rate_key, fair_key = l.fair_key, batch_key = l.batch_key
         FROM live l WHERE j.id = l.id AND NOT l.inserted AND $10::text = 'last'
       RETURNING j.*
     ),
     records AS (
       SELECT * FROM created UNION ALL SELECT * FROM replaced
       UNION ALL SELECT j.* FROM skiplock.job_record j JOIN live l ON j.id = l.id WHERE NOT l.inserted AND $10::text <> 'last'
     )
     SELECT ${liveJobColumns('r', 'l')}, l.inserted FROM live l JOIN records r ON r.id = l.id`,
    [clock(p.now), j.task, JSON.stringify(j.payload), j.priority, j.delay_ms, j.max_delay_ms, j.max_attempts, j.timeout_ms, j.debounce_key, j.keep, j.traceparent ?? null, j.flow_key ?? null, j.rate_key ?? null, j.cancel_on ?? null, j.fair_key ?? null, j.batch_key ?? null],
  );
}

/** The jobs holding these idempotency keys (insertJobs' second look, after a concurrent insert). */
export function jobsByIdempotencyKey(p: { keys: readonly string[] }): Statement {
  return statement(
    `SELECT j.*, false AS inserted FROM skiplock.job j WHERE j.idempotency_key = ANY ($1::text[]) AND j.idempotency_key IS NOT NULL`,
    [p.keys],
  );
}
