/**
 * Events (migrations/016_events.sql): the statements of sendEvent — the event stored, the waits
 * it completes, the `on:` jobs it starts, the jobs its cancelOn cancels — and of listing events.
 * The waits and callbacks are in src/store/event-waits.ts; the `on:` subscriptions and the pending
 * work a send leaves for other deployments in src/store/event-subscriptions.ts. `$1` is the clock,
 * as everywhere.
 *
 * The race a send and a wait registration run: the send stores its event and completes the waits
 * it finds; the registration looks for a stored event and, finding none, records a waiting step.
 * Under READ COMMITTED each statement reads the snapshot taken when it starts, so two committing
 * at the same moment could each miss the other — the event stored, the wait registered, neither
 * seeing the other. Both therefore start with eventLock, in their own statement of one batch (a
 * non-interactive transaction, so Neon's HTTP driver keeps working): the lock is held to commit,
 * and the statement after it takes its snapshot only once it holds the lock, so it sees whatever
 * the other committed. (Taking the lock inside the main statement would not do: its snapshot is
 * older than the lock.)
 *
 * The second race — a wait completed while its job is still RUNNING, before the result write that
 * suspends it — is settled on the job row: the completion sets job.wait_woken, and the result
 * write reads it from the row it updates (the row lock orders the two; src/store/claim.ts).
 */
import { MS, NOW, clock, type Clock } from './clock.ts';
import { cancelCtes, descendantsCtes } from './cancel.ts';
import { wakeCte } from './event-waits.ts';
import type { NewJobRow } from './job-row.ts';
import { QUEUE_INSERT, queueRowsFrom } from './queue.ts';
import { statement, type Statement } from './sql.ts';
import { fanInCtes } from './steps.ts';

const lockKey = (param: string) => `hashtextextended('skiplock/event/' || ${param}, 0)`;

/**
 * The lock a send and a wait of one name and key both take (first statement of their batch). A
 * wait with a key locks `name key`; a wait without one matches every event of the name, so it
 * locks `name`. A send locks `name` shared (sends of one name do not wait for each other) and,
 * with a key, `name key` exclusively — always in that order, so no two of them deadlock.
 */
export function eventLock(p: { name: string; key: string | null; for: 'send' | 'wait' }): Statement {
  if (p.for === 'wait') return statement(`SELECT pg_advisory_xact_lock(${lockKey('$1')})`, [p.key === null ? p.name : `${p.name} ${p.key}`]);
  if (p.key === null) return statement(`SELECT pg_advisory_xact_lock_shared(${lockKey('$1')})`, [p.name]);
  return statement(`SELECT pg_advisory_xact_lock_shared(${lockKey('$1')}), pg_advisory_xact_lock(${lockKey('$2')})`, [p.name, `${p.name} ${p.key}`]);
}

/**
 * The locks of a ctx.waitForAny (first statement of its batch): each alternative's, as eventLock
 * takes it for one wait, in one order — the strings sorted — whatever order the handler listed
 * them in. Every transaction that takes several of these locks takes them in that order: a send
 * takes `name` before `name key` (a prefix sorts first), and a send holds locks of one name only.
 * So no wait and send, nor two waits, can each hold a lock the other is waiting for: no deadlock,
 * however many names a wait lists.
 */
export function eventWaitLocks(alternatives: readonly { name: string; key: string | null }[]): Statement {
  const keys = [...new Set(alternatives.map((a) => (a.key === null ? a.name : `${a.name} ${a.key}`)))].sort();
  return statement(`SELECT ${keys.map((_, i) => `pg_advisory_xact_lock(${lockKey(`$${i + 1}`)})`).join(', ')}`, keys);
}

/** The cancelOn entries an event matches (job.cancel_on): `name` (any key) and, with a key, `name key`. */
export const cancelTokens = (name: string, key: string | null) => (key === null ? [name] : [name, `${name} ${key}`]);



/** One job an event starts (a task with `on:`): the row an enqueue would insert; its idempotency key is derived from the event. */
export type TriggeredJobRow = Omit<NewJobRow, 'idempotency_key' | 'schedule_name' | 'scheduled_for' | 'run_at'> & { cancel_on?: string[] | null };

/**
 * A send's main statement (after eventLock): stores the event — or, when its idempotency key is
 * known, answers the stored one and writes nothing — completes the waits for it (of each job
 * created before the event, its first waiting step by seq — the call order — for this name and
 * this key or no key — a ctx.waitForEvent, or a ctx.waitForAny with such an alternative — whose
 * timeout has not passed: parallel waits of one job each take their own event, and a wait never
 * takes one stored at or after its timeout), wakes their jobs, and enqueues the triggered jobs
 * (one per task, idempotency key `skiplock:event:<id>:<task>`).
 * Also locks the jobs its cancelOn matches, so that cancelJobsByEvent, next in the batch, sees
 * the children a concurrent ctx.invoke of theirs commits (as runtime/admin.ts's lockJob does).
 *
 * The event's id is drawn first and its row inserted last, with the counts: a concurrent send of
 * the same idempotency key fails on the unique index (23505) and the caller reads the first.
 */
export function sendEvent(p: {
  now: Clock;
  name: string;
  key: string | null;
  /** JSON text of the data, or null. */
  data: string | null;
  idempotencyKey: string | null;
  triggered: readonly TriggeredJobRow[];
  /** [{task, message}] of `on:` tasks whose schema refused the data, or null. */
  refused: string | null;
  /**
   * The `on:` tasks of this name the sender has (started or refused above). Every other task a
   * deployment registered for the name (skiplock.registered_task) is left pending for it
   * (skiplock.event_pending, dispatchPendingEvents). Default none: all of them are pending.
   */
  local?: readonly string[];
}): Statement {
  const keyMatch = p.key === null ? 's.event_key IS NULL' : '(s.event_key IS NULL OR s.event_key = $3)';
  return statement(
    `WITH fresh AS MATERIALIZED (
       SELECT nextval(pg_get_serial_sequence('skiplock.event', 'id')) AS id, ${NOW} AS at
        WHERE $5::text IS NULL OR NOT EXISTS (SELECT 1 FROM skiplock.event e WHERE e.idempotency_key = $5 AND e.idempotency_key IS NOT NULL)
     ),
     ${completedWaitsCtes(keyMatch)},
     ${wakeCte('woken', 'waits')},
     ${triggeredJobsCtes()},
     -- The subscribed tasks this send does not start: for the deployments that registered them (migration 018).
     left_pending AS (
       INSERT INTO skiplock.event_pending (event_id, task, event_name)
       SELECT f.id, r.task, $2 FROM fresh f, skiplock.registered_task r
        WHERE $2 = ANY (r.events) AND r.task <> ALL ($9::text[])
       RETURNING 1
     ),
     cancel_locked AS (
       SELECT j.id FROM skiplock.queue j, fresh f
        WHERE j.cancel_on && $8::text[] AND j.cancel_on IS NOT NULL AND j.created_at < f.at
        FOR UPDATE OF j
     ),
     stored AS (
       INSERT INTO skiplock.event AS e (id, name, key, data, idempotency_key, created_at, woken, started, refused, pending)
       OVERRIDING SYSTEM VALUE
       SELECT f.id, $2, $3, $4::jsonb, $5, f.at, (SELECT count(*) FROM woken), (SELECT count(*) FROM started), $7::jsonb,
              (SELECT count(*) FROM left_pending)
         FROM fresh f
       RETURNING e.*
     )
     SELECT true AS inserted, s.*, (SELECT count(*) FROM cancel_locked)::int AS cancel_targets FROM stored s
     UNION ALL
     SELECT false, e.*, 0 FROM skiplock.event e
      WHERE e.idempotency_key = $5 AND e.idempotency_key IS NOT NULL AND NOT EXISTS (SELECT 1 FROM fresh)`,
    [
      clock(p.now), p.name, p.key, p.data, p.idempotencyKey,
      JSON.stringify(p.triggered.map((t, ord) => ({ ord, ...t }))), p.refused, cancelTokens(p.name, p.key), p.local ?? [],
    ],
  );
}

/**
 * `firsts` and `waits` (a send's, after `fresh`): of each job created before the event, its first
 * waiting step by seq that the event matches and whose timeout has not passed — a ctx.waitForEvent
 * of this name and `keyMatch`, or a ctx.waitForAny one of whose alternatives (`name` or `name key`,
 * migration 020) is among the event's tokens (`$8`, cancelTokens) — completed with the event. A
 * step another send completed meanwhile is re-checked under its row lock and left alone: of two
 * events sent at once to one any-wait, exactly one wins. Answers the jobs' ids (`waits`).
 */
function completedWaitsCtes(keyMatch: string): string {
  return `firsts AS (
       SELECT DISTINCT ON (c.job_id) c.job_id, c.id FROM (
         SELECT s.job_id, s.id, s.seq FROM skiplock.job_step s, fresh f
          WHERE s.kind = 'event' AND s.status = 'waiting' AND s.event_name = $2 AND ${keyMatch}
            AND (s.wake_at IS NULL OR s.wake_at > f.at)
         UNION ALL
         SELECT s.job_id, s.id, s.seq FROM skiplock.job_step s, fresh f
          WHERE s.kind = 'any-event' AND s.status = 'waiting' AND s.event_alternatives && $8::text[]
            AND (s.wake_at IS NULL OR s.wake_at > f.at)
       ) c
        ORDER BY c.job_id, c.seq
     ),
     waits AS (
       UPDATE skiplock.job_step s SET status = 'done', event_id = f.id, finished_at = f.at,
              output = CASE WHEN s.kind = 'any-event'
                            THEN jsonb_build_object('event', $2::text, 'key', $3::text, 'data', $4::jsonb, 'eventId', f.id::text)
                            ELSE jsonb_build_object('data', $4::jsonb, 'eventId', f.id::text) END,
              duration_ms = least(greatest(round(extract(epoch FROM f.at - s.started_at) * 1000), 0), 2147483647)::int
         FROM fresh f, firsts w
        WHERE s.job_id = w.job_id AND s.id = w.id AND s.kind IN ('event', 'any-event') AND s.status = 'waiting'
          AND (s.wake_at IS NULL OR s.wake_at > f.at)
          AND EXISTS (SELECT 1 FROM skiplock.queue j WHERE j.id = s.job_id AND j.created_at < f.at)
       RETURNING s.job_id
     )`;
}

/**
 * `input` and `started` (a send's, after `fresh`): the jobs of the triggered rows (`$6`, in their
 * order), due `delay_ms` after the event, each with the idempotency key `skiplock:event:<id>:<task>`.
 */
function triggeredJobsCtes(): string {
  return `input AS MATERIALIZED (
       SELECT * FROM jsonb_to_recordset($6::jsonb) AS i(
         ord int, task text, payload jsonb, priority smallint, delay_ms bigint, max_attempts int, timeout_ms int,
         traceparent text, flow_key text, rate_key text, fair_key text, batch_key text, cancel_on text[])
     ),
     started AS (
       INSERT INTO skiplock.job_record AS j (task, payload, priority, run_at, max_attempts, timeout_ms, idempotency_key,
                                      flow_key, rate_key, fair_key, batch_key, cancel_on, created_at, updated_at, traceparent)
       SELECT i.task, i.payload, i.priority, f.at + i.delay_ms ${MS}, i.max_attempts, i.timeout_ms,
              'skiplock:event:' || f.id || ':' || i.task, i.flow_key, i.rate_key, i.fair_key, i.batch_key, i.cancel_on, f.at, f.at, i.traceparent
         FROM fresh f CROSS JOIN input i ORDER BY i.ord
       ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
       RETURNING j.*
     ),
     started_live AS (
       ${QUEUE_INSERT}
       ${queueRowsFrom('started')}
     )`;
}

/** A send again by its idempotency key (after a concurrent first send won the unique index). */
export function eventByIdempotencyKey(p: { key: string }): Statement {
  return statement(`SELECT false AS inserted, e.* FROM skiplock.event e WHERE e.idempotency_key = $1 AND e.idempotency_key IS NOT NULL`, [p.key]);
}

/**
 * cancelOn, the last statement of a send's batch: the jobs created before the event whose
 * cancel_on matches it are cancelled as a person's cancel does (src/store/admin.ts cancelJob):
 * QUEUED and WAITING ones end CANCELLED, RUNNING ones are asked to stop, descendants included,
 * and a cancelled child reaches its parent (fan-in). Only for an event this batch stored: a replay
 * of an idempotency key cancels nothing (the event row of this transaction has created_at = now).
 */
export function cancelJobsByEvent(p: { now: Clock; name: string; key: string | null; idempotencyKey: string | null }): Statement {
  const stored = p.idempotencyKey === null
    ? `SELECT 1 FROM skiplock.event e WHERE e.name = $2 AND ${p.key === null ? 'e.key IS NULL' : 'e.key = $3'} AND e.created_at = ${NOW} AND $4::text IS NULL`
    : `SELECT 1 FROM skiplock.event e WHERE e.idempotency_key = $4 AND e.idempotency_key IS NOT NULL AND e.created_at = ${NOW}`;
  return statement(
    `WITH RECURSIVE ${cancelCtes('changed', `SELECT j.id FROM skiplock.queue j
        WHERE j.cancel_on && $5::text[] AND j.cancel_on IS NOT NULL AND j.created_at < ${NOW} AND EXISTS (${stored})`,
       `'cancelled by the event ' || $2 || coalesce(' key ' || $3, '')`)},
     ${descendantsCtes({
       firstLevel: `SELECT c.id FROM skiplock.job_record c WHERE c.parent_id IN (SELECT id FROM changed) AND c.parent_id IS NOT NULL`,
       stepsOf: `SELECT id FROM changed UNION ALL SELECT id FROM descendants`,
       error: `'cancelled with its parent job'`,
       skip: `SELECT id FROM changed`,
     })},
     ${fanInCtes('changed')},
     counted AS (
       UPDATE skiplock.event e SET cancelled = (SELECT count(*) FROM changed)
        WHERE e.id = (SELECT max(x.id) FROM skiplock.event x WHERE x.name = $2 AND ${p.key === null ? 'x.key IS NULL' : 'x.key = $3'} AND x.created_at = ${NOW})
          AND EXISTS (SELECT 1 FROM changed)
     )
     SELECT count(*)::int AS cancelled, count(*) FILTER (WHERE status = 'CANCELLED')::int AS ended FROM changed`,
    [clock(p.now), p.name, p.key, p.idempotencyKey, cancelTokens(p.name, p.key)],
  );
}

/** Events, newest first, by id (keyset paging like listJobs). */
export function listEvents(p: { name: string | null; key: string | null; beforeId: string | null; limit: number }): Statement {
  const values: unknown[] = [];
  const where: string[] = [];
  if (p.name !== null) where.push(`name = $${values.push(p.name)}`);
  if (p.key !== null) where.push(`key = $${values.push(p.key)}`);
  if (p.beforeId !== null) where.push(`id < $${values.push(p.beforeId)}::bigint`);
  return statement(
    `SELECT * FROM skiplock.event ${where.length > 0 ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY id DESC LIMIT $${values.push(p.limit)}`,
    values,
  );
}

/* Retention: pruneFinishedJobs (src/store/retention.ts) deletes events past `eventsMs` in the same statement. */
