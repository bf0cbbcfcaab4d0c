/**
 * Events (migrations/016_events.sql): the statements of sendEvent, of ctx.waitForEvent and of
 * callbacks. `$1` is the clock, as everywhere.
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
import { MS, NOW, clock, leaseUntil, type Clock } from './clock.ts';
import type { NewJobRow } from './job-row.ts';
import { statement, type Statement } from './sql.ts';
import { fanInCtes, markerParts } from './steps.ts';
import type { StepFence } from './steps.ts';

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

/** The cancelOn entries an event matches (job.cancel_on): `name` (any key) and, with a key, `name key`. */
export const cancelTokens = (name: string, key: string | null) => (key === null ? [name] : [name, `${name} ${key}`]);

/**
 * Makes the jobs of `from` (a CTE of `job_id`) due now because one of their waits completed: a
 * WAITING or QUEUED (a timed wait) one is due now; a RUNNING one gets wait_woken, which its result
 * write reads. Jobs that finished meanwhile are left alone.
 */
function wakeCte(name: string, from: string): string {
  return `${name} AS (
       UPDATE skiplock.job j SET
         status = CASE WHEN j.status = 'WAITING' THEN 'QUEUED' ELSE j.status END,
         run_at = CASE WHEN j.status IN ('WAITING', 'QUEUED') THEN ${NOW} ELSE j.run_at END,
         wait_woken = (j.status = 'RUNNING'), updated_at = ${NOW}
        WHERE j.id = ANY (ARRAY(SELECT job_id FROM ${from})) AND j.status IN ('QUEUED', 'RUNNING', 'WAITING')
       RETURNING j.id
     )`;
}

const ACTIVE = `('QUEUED', 'RUNNING', 'WAITING')`;

/** One job an event starts (a task with `on:`): the row an enqueue would insert; its idempotency key is derived from the event. */
export type TriggeredJobRow = Omit<NewJobRow, 'idempotency_key' | 'schedule_name' | 'scheduled_for' | 'run_at'> & { cancel_on?: string[] | null };

/**
 * A send's main statement (after eventLock): stores the event — or, when its idempotency key is
 * known, answers the stored one and writes nothing — completes the waits for it (of each job
 * created before the event, its first waiting step by seq — the call order — for this name and
 * this key or no key whose timeout has not passed: parallel waits of one job each take their own
 * event, and a wait never takes one stored at or after its timeout), wakes their jobs, and enqueues the triggered jobs (one per task, idempotency key `skiplock:event:<id>:<task>`).
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
     firsts AS (
       SELECT DISTINCT ON (s.job_id) s.job_id, s.id FROM skiplock.job_step s, fresh f
        WHERE s.kind = 'event' AND s.status = 'waiting' AND s.event_name = $2 AND ${keyMatch}
          AND (s.wake_at IS NULL OR s.wake_at > f.at)
        ORDER BY s.job_id, s.seq
     ),
     waits AS (
       UPDATE skiplock.job_step s SET status = 'done', event_id = f.id, finished_at = f.at,
              output = jsonb_build_object('data', $4::jsonb, 'eventId', f.id::text),
              duration_ms = least(greatest(round(extract(epoch FROM f.at - s.started_at) * 1000), 0), 2147483647)::int
         FROM fresh f, firsts w
        WHERE s.job_id = w.job_id AND s.id = w.id AND s.kind = 'event' AND s.status = 'waiting' AND (s.wake_at IS NULL OR s.wake_at > f.at)
          AND EXISTS (SELECT 1 FROM skiplock.job j WHERE j.id = s.job_id AND j.created_at < f.at AND j.status IN ${ACTIVE})
       RETURNING s.job_id
     ),
     ${wakeCte('woken', 'waits')},
     input AS MATERIALIZED (
       SELECT * FROM jsonb_to_recordset($6::jsonb) AS i(
         ord int, task text, payload jsonb, priority smallint, delay_ms bigint, max_attempts int, timeout_ms int,
         traceparent text, flow_key text, rate_key text, cancel_on text[])
     ),
     started AS (
       INSERT INTO skiplock.job AS j (task, payload, priority, run_at, max_attempts, timeout_ms, idempotency_key,
                                      flow_key, rate_key, cancel_on, created_at, updated_at, traceparent)
       SELECT i.task, i.payload, i.priority, f.at + i.delay_ms ${MS}, i.max_attempts, i.timeout_ms,
              'skiplock:event:' || f.id || ':' || i.task, i.flow_key, i.rate_key, i.cancel_on, f.at, f.at, i.traceparent
         FROM fresh f CROSS JOIN input i ORDER BY i.ord
       ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
       RETURNING j.id
     ),
     -- The subscribed tasks this send does not start: for the deployments that registered them (migration 018).
     left_pending AS (
       INSERT INTO skiplock.event_pending (event_id, task, event_name)
       SELECT f.id, r.task, $2 FROM fresh f, skiplock.registered_task r
        WHERE $2 = ANY (r.events) AND r.task <> ALL ($9::text[])
       RETURNING 1
     ),
     cancel_locked AS (
       SELECT j.id FROM skiplock.job j, fresh f
        WHERE j.cancel_on && $8::text[] AND j.cancel_on IS NOT NULL AND j.status IN ${ACTIVE} AND j.created_at < f.at
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

/** A send again by its idempotency key (after a concurrent first send won the unique index). */
export function eventByIdempotencyKey(p: { key: string }): Statement {
  return statement(`SELECT false AS inserted, e.* FROM skiplock.event e WHERE e.idempotency_key = $1 AND e.idempotency_key IS NOT NULL`, [p.key]);
}

const CANCEL_SET = `status = CASE WHEN j.status IN ('QUEUED', 'WAITING') THEN 'CANCELLED' ELSE j.status END,
       finished_at = CASE WHEN j.status IN ('QUEUED', 'WAITING') THEN ${NOW} ELSE j.finished_at END,
       pending_children = 0,
       cancel_requested = (j.status = 'RUNNING'),
       last_error = CASE WHEN j.status IN ('QUEUED', 'WAITING') THEN 'cancelled by the event ' || $2 || coalesce(' key ' || $3, '') ELSE j.last_error END,
       updated_at = ${NOW}`;

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
    `WITH RECURSIVE changed AS (
       UPDATE skiplock.job j SET ${CANCEL_SET}
        WHERE j.cancel_on && $5::text[] AND j.cancel_on IS NOT NULL AND j.status IN ${ACTIVE} AND j.created_at < ${NOW}
          AND EXISTS (${stored})
       RETURNING j.*
     ),
     tree(id) AS (
       SELECT c.id FROM skiplock.job c WHERE c.parent_id IN (SELECT id FROM changed) AND c.parent_id IS NOT NULL
       UNION
       SELECT c.id FROM skiplock.job c JOIN tree t ON c.parent_id = t.id WHERE c.parent_id IS NOT NULL
     ),
     descendants AS (
       UPDATE skiplock.job j SET ${CANCEL_SET}
         FROM tree WHERE j.id = tree.id AND j.status IN ${ACTIVE} AND j.id <> ALL (ARRAY(SELECT id FROM changed))
       RETURNING j.id
     ),
     orphaned_steps AS (
       UPDATE skiplock.job_step s SET status = 'failed', child_status = 'CANCELLED', finished_at = ${NOW},
              error = 'cancelled with its parent job'
        WHERE s.kind = 'invoke' AND s.status = 'waiting'
          AND s.job_id IN (SELECT id FROM changed UNION ALL SELECT id FROM descendants)
     ),
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

/** One task a deployment runs, with the event names its `on:` subscribes to (sorted; [] for none). */
export interface RegisteredTaskRow {
  task: string;
  events: string[];
}

/**
 * `registered AS (...)`: upserts this deployment's tasks into skiplock.registered_task (migration
 * 018) from `param` (a JSON array of RegisteredTaskRow). A row already holding the same list is
 * not touched (no lock, no dead tuple: every instance of a deployment registers the same rows);
 * another list for a task replaces the stored one. Rows in task order, so that two instances
 * registering at once lock them in one order.
 */
export function registerTasksCte(param: string): string {
  return `registered AS (
       INSERT INTO skiplock.registered_task AS r (task, events, registered_at)
       SELECT x.task, x.events, ${NOW} FROM jsonb_to_recordset(${param}::jsonb) AS x(task text, events text[])
        WHERE NOT EXISTS (SELECT 1 FROM skiplock.registered_task o WHERE o.task = x.task AND o.events = x.events)
        ORDER BY x.task
       ON CONFLICT (task) DO UPDATE SET events = excluded.events, registered_at = excluded.registered_at
     )`;
}

/** The registration alone (skiplock.migrate registers the deployment's tasks right after migrating). */
export function registerTasks(p: { now: Clock; tasks: readonly RegisteredTaskRow[] }): Statement {
  return statement(`WITH ${registerTasksCte('$2')} SELECT 1 AS registered`, [clock(p.now), JSON.stringify(p.tasks)]);
}

/** A deployment's `on:` subscriptions, as the statements below take them. */
export interface Subscriptions {
  /** Task i subscribes to event name i. */
  tasks: readonly string[];
  names: readonly string[];
}

/** The values of subscriptionMatch: the distinct tasks, the distinct names, and each pair as `name task`. */
export const subscriptionValues = (s: Subscriptions): [string[], string[], string[]] => [
  [...new Set(s.tasks)], [...new Set(s.names)], s.tasks.map((task, i) => `${s.names[i]} ${task}`),
];

/**
 * The pending rows of these subscriptions (`p` is skiplock.event_pending; the params are
 * subscriptionValues'): by event_pending_task_idx on the distinct tasks and names (`= ANY` of
 * constants, which the planner estimates from the column's statistics), then the exact pairs as a
 * filter — `name task`, unambiguous since an event name has no space. A row for a task this
 * deployment has but whose `on:` does not name that event is another version's: never matched.
 * (An EXISTS over `(task, event_name) IN (unnest …)` was planned as a scan of every pending row:
 * 52 ms past 20,000 rows left for another deployment's task; this is an index probe.)
 */
const subscriptionMatch = (tasks: string, names: string, pairs: string) =>
  `p.task = ANY (${tasks}::text[]) AND p.event_name = ANY (${names}::text[]) AND p.event_name || ' ' || p.task = ANY (${pairs}::text[])`;

/**
 * The claim's probe of pending `on:` work (completeAndClaim's events_due): whether an event left a
 * pending row for one of this deployment's subscriptions.
 */
export const pendingEventsExist = (tasks: string, names: string, pairs: string) =>
  `EXISTS (SELECT 1 FROM skiplock.event_pending p WHERE ${subscriptionMatch(tasks, names, pairs)})`;

/** The oldest pending `on:` work of these subscriptions (for the wake state: due since its event). */
export const oldestPendingEvent = (tasks: string, names: string, pairs: string) =>
  `(SELECT min(e.created_at) FROM skiplock.event_pending p JOIN skiplock.event e ON e.id = p.event_id WHERE ${subscriptionMatch(tasks, names, pairs)})`;

/** The pending `on:` work of these subscriptions, oldest event first: each row's event and task. */
export function pendingEvents(p: Subscriptions & { limit: number }): Statement {
  return statement(
    `SELECT p.event_id::text AS event_id, p.task, e.name, e.data FROM skiplock.event_pending p JOIN skiplock.event e ON e.id = p.event_id
      WHERE ${subscriptionMatch('$1', '$2', '$3')}
      ORDER BY p.event_id, p.task LIMIT $4`,
    [...subscriptionValues(p), p.limit],
  );
}

/** One pending `on:` job, planned in JS (payload schema, flow keys, cancelOn): the row to insert, or why not. */
export type DispatchRow = { event_id: string; task: string } & (
  | (Omit<TriggeredJobRow, 'task' | 'delay_ms' | 'traceparent'> & { refused?: undefined })
  | { refused: string }
);

/**
 * Starts pending `on:` jobs (the rows pendingEvents read, planned): deletes their pending rows and,
 * for the rows this statement deleted, inserts the jobs (idempotency key
 * `skiplock:event:<id>:<task>`, as a send does) and counts them on their events (started, pending,
 * refused). The delete is the once: a concurrent dispatch of the same row waits for it, then finds
 * it gone and does nothing; the job's idempotency key holds besides. Answers started and taken.
 */
export function dispatchPendingEvents(p: { now: Clock; rows: readonly DispatchRow[] }): Statement {
  return statement(
    `WITH input AS MATERIALIZED (
       SELECT * FROM jsonb_to_recordset($2::jsonb) AS i(
         event_id bigint, task text, payload jsonb, priority smallint, max_attempts int, timeout_ms int,
         flow_key text, rate_key text, cancel_on text[], refused text)
     ),
     taken AS (
       DELETE FROM skiplock.event_pending p USING input i WHERE p.event_id = i.event_id AND p.task = i.task
       RETURNING p.event_id, p.task
     ),
     started AS (
       INSERT INTO skiplock.job AS j (task, payload, priority, run_at, max_attempts, timeout_ms, idempotency_key,
                                      flow_key, rate_key, cancel_on, created_at, updated_at)
       SELECT i.task, i.payload, i.priority, ${NOW}, i.max_attempts, i.timeout_ms, 'skiplock:event:' || i.event_id || ':' || i.task,
              i.flow_key, i.rate_key, i.cancel_on, ${NOW}, ${NOW}
         FROM input i JOIN taken t ON t.event_id = i.event_id AND t.task = i.task
        WHERE i.refused IS NULL
        ORDER BY i.event_id, i.task
       ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
       RETURNING j.idempotency_key
     ),
     counted AS (
       UPDATE skiplock.event e SET
         pending = greatest(e.pending - (SELECT count(*) FROM taken t WHERE t.event_id = e.id), 0),
         started = e.started + (SELECT count(*) FROM started s
                                 WHERE s.idempotency_key IN (SELECT 'skiplock:event:' || t.event_id || ':' || t.task FROM taken t WHERE t.event_id = e.id)),
         refused = CASE WHEN EXISTS (SELECT 1 FROM taken t JOIN input i ON i.event_id = t.event_id AND i.task = t.task
                                      WHERE t.event_id = e.id AND i.refused IS NOT NULL)
                        THEN coalesce(e.refused, '[]'::jsonb) || (
                               SELECT jsonb_agg(jsonb_build_object('task', i.task, 'message', i.refused) ORDER BY i.task)
                                 FROM taken t JOIN input i ON i.event_id = t.event_id AND i.task = t.task
                                WHERE t.event_id = e.id AND i.refused IS NOT NULL)
                        ELSE e.refused END
        WHERE e.id = ANY (ARRAY(SELECT event_id FROM taken))
     )
     SELECT (SELECT count(*) FROM started)::int AS started, (SELECT count(*) FROM taken)::int AS taken`,
    [clock(p.now), JSON.stringify(p.rows)],
  );
}

/* Retention: pruneFinishedJobs (src/store/retention.ts) deletes events past `eventsMs` in the same statement. */

/**
 * `fence AS (...)`: the job still RUNNING under this run's lease (as steps.ts's fence), its
 * step_count bumped by `$8` (and the ctx.patched markers this write carries: markerParts) and its
 * lease extended.
 */
function fence(f: StepFence, values: unknown[]): string {
  const marks = markerParts(f, values);
  return `fence AS (
       UPDATE skiplock.job j SET step_count = j.step_count + $8::int${marks.count},
              locked_until = greatest(j.locked_until, ${leaseUntil('$6', '$5')}), updated_at = ${NOW}
        WHERE j.id = $2::bigint AND j.status = 'RUNNING' AND j.locked_by = $3 AND j.attempts = $4
       RETURNING j.id
     )${marks.cte}`;
}
const fenceValues = (f: StepFence) => [clock(f.now), f.jobId, f.lockedBy, f.attempt, f.leaseMs, f.leaseGraceMs];

/** What a wait's statement answers: whether the lease held, and the step as it now is. */
export interface WaitRow {
  held: number;
  status: 'waiting' | 'done' | null;
  output: unknown;
  wake_at: unknown;
}

/**
 * ctx.waitForEvent reached (after eventLock, in one batch): the first event of this name (and
 * key) stored after the job was created and not consumed by an earlier wait of this job (the
 * event ids its other event steps recorded) completes the step at once; otherwise the step is
 * recorded waiting — or, already recorded waiting (a run resumed for another reason), looked at
 * again: completed by such an event stored before its timeout (wake_at: both instants are the
 * database's clock), timed out when its wake_at has passed, or left waiting.
 * Answers held, status, output ({data, eventId}, or null after a timeout) and wake_at.
 */
export function waitForEvent(p: StepFence & { id: string; seq: number; isNew: boolean; name: string; key: string | null; timeoutMs: number | null }): Statement {
  const values: unknown[] = [...fenceValues(p), p.id, p.isNew ? 1 : 0, p.seq, p.name, p.key, p.timeoutMs];
  const fenced = fence(p, values);
  return statement(
    `WITH job_row AS (
       SELECT j.created_at FROM skiplock.job j WHERE j.id = $2::bigint AND j.status = 'RUNNING' AND j.locked_by = $3 AND j.attempts = $4
     ),
     prior AS (SELECT s.status, s.output, s.wake_at FROM skiplock.job_step s WHERE s.job_id = $2::bigint AND s.id = $7),
     found AS (
       SELECT e.id, e.data FROM skiplock.event e, job_row r
        WHERE e.name = $10 AND ${p.key === null ? 'true' : 'e.key = $11'} AND e.created_at > r.created_at
          AND NOT EXISTS (SELECT 1 FROM prior WHERE prior.status <> 'waiting' OR prior.wake_at <= e.created_at)
          AND e.id <> ALL (ARRAY(SELECT c.event_id FROM skiplock.job_step c
                                  WHERE c.job_id = $2::bigint AND c.kind = 'event' AND c.event_id IS NOT NULL))
        ORDER BY e.created_at, e.id
        LIMIT 1
     ),
     ${fenced},
     written AS (
       INSERT INTO skiplock.job_step AS s (job_id, id, seq, kind, status, output, attempts, started_at, finished_at, wake_at, event_name, event_key, event_id)
       SELECT f.id, $7, $9, 'event', CASE WHEN x.id IS NOT NULL OR $12::bigint <= 0 THEN 'done' ELSE 'waiting' END,
              CASE WHEN x.id IS NOT NULL THEN jsonb_build_object('data', x.data, 'eventId', x.id::text) END, 0, ${NOW},
              CASE WHEN x.id IS NOT NULL OR $12::bigint <= 0 THEN ${NOW} END, ${NOW} + $12::bigint ${MS}, $10, $11, x.id
         FROM fence f LEFT JOIN found x ON true
       ON CONFLICT (job_id, id) DO UPDATE SET status = 'done', output = excluded.output, event_id = excluded.event_id,
              finished_at = CASE WHEN excluded.event_id IS NULL THEN s.wake_at ELSE ${NOW} END
        WHERE s.status = 'waiting' AND (excluded.event_id IS NOT NULL OR s.wake_at <= ${NOW})
       RETURNING s.status, s.output, s.wake_at
     )
     SELECT (SELECT count(*) FROM fence)::int AS held, coalesce(w.status, p.status) AS status,
            CASE WHEN w.status IS NOT NULL THEN w.output ELSE p.output END AS output, coalesce(w.wake_at, p.wake_at) AS wake_at
       FROM (SELECT 1) one LEFT JOIN written w ON true LEFT JOIN prior p ON true`,
    values,
  );
}

/**
 * ctx.createCallback reached for the first time: its step, waiting (until `timeoutMs` from now,
 * or for ever). Answers held.
 */
export function createCallbackStep(p: StepFence & { id: string; seq: number; timeoutMs: number | null }): Statement {
  const values: unknown[] = [...fenceValues(p), p.id, 1, p.seq, p.timeoutMs];
  const fenced = fence(p, values);
  return statement(
    `WITH ${fenced}
     INSERT INTO skiplock.job_step (job_id, id, seq, kind, status, attempts, started_at, wake_at)
     SELECT f.id, $7, $9, 'callback', 'waiting', 0, ${NOW}, ${NOW} + $10::bigint ${MS} FROM fence f
     RETURNING 1 AS held`,
    values,
  );
}

/**
 * ctx.waitForCallback: the callback step as it is now, timed out first when its wake_at has
 * passed (a fact of the clock, like a sleep's end: no fence). Answers status, output, wake_at.
 */
export function readCallbackStep(p: { now: Clock; jobId: string; id: string }): Statement {
  return statement(
    `WITH timed_out AS (
       UPDATE skiplock.job_step s SET status = 'done', finished_at = s.wake_at
        WHERE s.job_id = $2::bigint AND s.id = $3 AND s.kind = 'callback' AND s.status = 'waiting' AND s.wake_at <= ${NOW}
       RETURNING s.status, s.output, s.wake_at
     )
     SELECT * FROM timed_out
     UNION ALL
     SELECT s.status, s.output, s.wake_at FROM skiplock.job_step s
      WHERE s.job_id = $2::bigint AND s.id = $3 AND s.kind = 'callback' AND NOT EXISTS (SELECT 1 FROM timed_out)`,
    [clock(p.now), p.jobId, p.id],
  );
}

/**
 * A POST to a callback URL (its token already verified): the waiting callback step completes
 * with `{data}` and its job wakes, in one statement — once. Answers `completed` (1 or 0) and
 * `status`, the step's status before (null: no such step).
 */
export function completeCallback(p: { now: Clock; jobId: string; id: string; data: string | null }): Statement {
  return statement(
    `WITH completed AS (
       UPDATE skiplock.job_step s SET status = 'done', output = jsonb_build_object('data', $4::jsonb), finished_at = ${NOW},
              duration_ms = least(greatest(round(extract(epoch FROM ${NOW} - s.started_at) * 1000), 0), 2147483647)::int
        WHERE s.job_id = $2::bigint AND s.id = $3 AND s.kind = 'callback' AND s.status = 'waiting'
          AND (s.wake_at IS NULL OR s.wake_at > ${NOW})
          AND EXISTS (SELECT 1 FROM skiplock.job j WHERE j.id = s.job_id AND j.status IN ${ACTIVE})
       RETURNING s.job_id
     ),
     ${wakeCte('woken', 'completed')}
     SELECT (SELECT count(*) FROM completed)::int AS completed,
            (SELECT s.status FROM skiplock.job_step s WHERE s.job_id = $2::bigint AND s.id = $3 AND s.kind = 'callback') AS status`,
    [clock(p.now), p.jobId, p.id, p.data],
  );
}
