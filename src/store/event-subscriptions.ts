/**
 * `on:` subscriptions (migration 018): the tasks each deployment registers with the event names its
 * `on:` subscribes to (skiplock.registered_task), and the pending `on:` work a send leaves for the
 * deployments that registered those tasks (skiplock.event_pending) — how a tick probes for it, reads
 * it and starts its jobs (dispatchPendingEvents). `$1` is the clock, as everywhere.
 */
import { NOW, clock, type Clock } from './clock.ts';
import type { TriggeredJobRow } from './events.ts';
import { QUEUE_INSERT, queueRowsFrom } from './queue.ts';
import { statement, type Statement } from './sql.ts';

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
         flow_key text, rate_key text, fair_key text, batch_key text, cancel_on text[], refused text)
     ),
     taken AS (
       DELETE FROM skiplock.event_pending p USING input i WHERE p.event_id = i.event_id AND p.task = i.task
       RETURNING p.event_id, p.task
     ),
     started AS (
       INSERT INTO skiplock.job_record AS j (task, payload, priority, run_at, max_attempts, timeout_ms, idempotency_key,
                                      flow_key, rate_key, fair_key, batch_key, cancel_on, created_at, updated_at)
       SELECT i.task, i.payload, i.priority, ${NOW}, i.max_attempts, i.timeout_ms, 'skiplock:event:' || i.event_id || ':' || i.task,
              i.flow_key, i.rate_key, i.fair_key, i.batch_key, i.cancel_on, ${NOW}, ${NOW}
         FROM input i JOIN taken t ON t.event_id = i.event_id AND t.task = i.task
        WHERE i.refused IS NULL
        ORDER BY i.event_id, i.task
       ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
       RETURNING j.*
     ),
     started_live AS (
       ${QUEUE_INSERT}
       ${queueRowsFrom('started')}
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
