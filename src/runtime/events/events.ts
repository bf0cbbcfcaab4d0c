/**
 * Events (docs/steps.md, "Events"): skiplock.sendEvent, and the tasks an event starts (`on:`) and
 * cancels (`cancelOn`). The statements are in src/store/events.ts; the waits a handler makes are
 * in src/runtime/steps/event-waits.ts.
 */
import * as z from 'zod';
import { SkiplockError, type ErrorIssue } from '../../core/errors.ts';
import { findUnstorableJson } from '../../core/json.ts';
import type { Clock } from '../../store/clock.ts';
import { cancelJobsByEvent, eventByIdempotencyKey, eventLock, listEvents, sendEvent, type TriggeredJobRow } from '../../store/events.ts';
import { dispatchPendingEvents, pendingEvents, type DispatchRow, type RegisteredTaskRow } from '../../store/event-subscriptions.ts';
import { toBool, toDateOrNull, toJson } from '../../store/rows.ts';
import { batchDeadlockSafe, sqlState, type Row, type Sql } from '../../store/sql.ts';
import { isJobId } from '../../core/job-id.ts';
import { checkTaskPayload, toIssues } from '../tasks/enqueue.ts';
import { cancelOnEntries } from './cancel-on.ts';
import { EVENT_NAME, eventKeySchema, eventNameSchema, storableString } from './names.ts';
import { jobKeys } from '../flow/keys.ts';
import type { Task, TaskRegistry } from '../tasks/task.ts';

export const EVENT_LIMITS = {
  /** An event's data, in bytes of JSON: 256 KiB. */
  maxDataBytes: 256 * 1024,
  /** Events kept by default (eventRetention): 7 days. */
  retentionMs: 7 * 24 * 3600 * 1000,
} as const;

/** An event name: 1–200 of letters, digits and `_ . : / -` (`order.paid`, `app/user.created`). */
export { EVENT_NAME };

/** What sendEvent takes; the HTTP API accepts exactly this shape as JSON. */
export const sendEventInputSchema = z.strictObject({
  name: eventNameSchema,
  /** Waits with this key (and waits without a key) match it. */
  key: eventKeySchema.optional(),
  /** Any JSON, at most 256 KiB of it: the waits' `data`, and the payload of the jobs it starts. */
  data: z.unknown().optional(),
  /** Sending the same key again answers the first send's result and writes nothing. */
  idempotencyKey: storableString.min(1).max(255).optional(),
});
export type SendEventInput = z.input<typeof sendEventInputSchema>;

export interface SendEventResult {
  /** The event's id (the first send's, for a replay of an idempotency key). */
  id: string;
  /** Waiting jobs it woke (their ctx.waitForEvent returns it). */
  woken: number;
  /** Jobs it started (tasks with `on:` this name). */
  started: number;
  /**
   * Tasks with `on:` this name that a deployment registered and this sender does not have: it could
   * not start their jobs itself; the deployment that registered them does, at its next tick (once
   * per event and task). 0 when nothing subscribes (the event is stored all the same, for waits).
   */
  pending: number;
  /** Jobs it cancelled or asked to stop (cancelOn); 0 for a replay. */
  cancelled: number;
  /** `on:` tasks whose payload schema refused the event's data: no job of theirs was started. */
  refused: { task: string; message: string }[];
  /** False for a replay of an idempotency key: nothing was written. */
  created: boolean;
}

/** A stored event, as listEvents returns it. */
export interface StoredEvent {
  id: string;
  name: string;
  key: string | null;
  data: unknown;
  idempotencyKey: string | null;
  createdAt: Date;
  woken: number;
  /** `on:` jobs started, by the send and since by the deployments that define the tasks. */
  started: number;
  /** `on:` jobs still to start, by a deployment that registered their task (see SendEventResult.pending). */
  pending: number;
  cancelled: number;
  refused: { task: string; message: string }[];
}

export function mapEvent(row: Row): StoredEvent {
  return {
    id: String(row.id),
    name: String(row.name),
    key: row.key === null || row.key === undefined ? null : String(row.key),
    data: toJson(row.data) ?? null,
    idempotencyKey: row.idempotency_key === null || row.idempotency_key === undefined ? null : String(row.idempotency_key),
    createdAt: toDateOrNull(row.created_at)!,
    woken: Number(row.woken ?? 0),
    started: Number(row.started ?? 0),
    pending: Number(row.pending ?? 0),
    cancelled: Number(row.cancelled ?? 0),
    refused: (toJson(row.refused) as StoredEvent['refused'] | null) ?? [],
  };
}

export function eventToJson(e: StoredEvent) {
  return { ...e, createdAt: e.createdAt.toISOString() };
}

/** The tasks each event name starts (`on:`). */
export function triggeredTasks(registry: TaskRegistry, name: string): Task[] {
  return [...registry.values()].filter((t) => t.on !== undefined && (typeof t.on === 'string' ? t.on === name : t.on.includes(name)));
}

/** Validates a send's input: the parsed input and its data as JSON text, or a SkiplockError (invalid_request). */
export function checkEvent(input: unknown): { name: string; key: string | null; data: unknown; dataText: string | null; idempotencyKey: string | null } {
  const parsed = sendEventInputSchema.safeParse(input);
  if (!parsed.success) throw new SkiplockError('invalid_request', 'invalid event', toIssues(parsed.error));
  const { name, key, data, idempotencyKey } = parsed.data;
  const issue = (message: string): never => {
    throw new SkiplockError('invalid_request', `invalid event: data ${message}`, [{ path: ['data'], message }]);
  };
  let text: string | null = null;
  if (data !== undefined) {
    let json: string | undefined;
    try {
      json = JSON.stringify(data);
    } catch {
      issue('is not JSON-serializable');
    }
    if (json === undefined) issue('is not JSON-serializable');
    if (json!.length > EVENT_LIMITS.maxDataBytes || new TextEncoder().encode(json!).length > EVENT_LIMITS.maxDataBytes)
      issue(`is more than ${EVENT_LIMITS.maxDataBytes} bytes of JSON`);
    const problem = findUnstorableJson(JSON.parse(json!), ['data']);
    if (problem) issue(`cannot be stored: ${problem.message} at ${problem.path.join('.')}`);
    text = json!;
  }
  return { name, key: key ?? null, data: text === null ? null : JSON.parse(text), dataText: text, idempotencyKey: idempotencyKey ?? null };
}

/**
 * One `on:` job of an event, validated in JS (invariant 10: the payload is the data's JSON form, as
 * an enqueue stores it; its flow-control keys and cancelOn computed from the schema's parse): the
 * columns to insert, or why the task refuses the data.
 */
function planOnJob(task: Task, data: unknown): Omit<TriggeredJobRow, 'delay_ms' | 'traceparent'> | { refused: string } {
  try {
    const payload = checkTaskPayload(task, data ?? {}, ['data']);
    if ('issues' in payload) return { refused: describeIssues(payload.issues) };
    return {
      task: task.name, payload: payload.stored, priority: task.priority, max_attempts: task.maxAttempts, timeout_ms: task.timeoutMs,
      ...jobKeys(task, payload.value, ['data']), cancel_on: cancelOnEntries(task, payload.value, undefined),
    };
  } catch (error) {
    return { refused: error instanceof Error ? error.message : String(error) };
  }
}

/** The triggered jobs of an event, validated in JS first: the rows to insert, and the refusals to report. */
function planTriggered(registry: TaskRegistry, name: string, data: unknown, traceparent: string | undefined) {
  const rows: TriggeredJobRow[] = [];
  const refused: { task: string; message: string }[] = [];
  for (const task of triggeredTasks(registry, name)) {
    const planned = planOnJob(task, data);
    if ('refused' in planned) refused.push({ task: task.name, message: planned.refused });
    else rows.push({ ...planned, delay_ms: 0, traceparent: traceparent ?? null });
  }
  return { rows, refused };
}

/** The event names a task's `on:` subscribes to, sorted ([] without `on:`). */
function onNames(task: Task): string[] {
  return task.on === undefined ? [] : [...new Set(typeof task.on === 'string' ? [task.on] : task.on)].sort();
}

/**
 * What a deployment registers (skiplock.registered_task, migration 018): each task it runs and the
 * event names its `on:` subscribes to. Its first tick's claim writes them (and skiplock.migrate).
 */
export function registrationRows(registry: TaskRegistry): RegisteredTaskRow[] {
  return [...registry.values()].map((task) => ({ task: task.name, events: onNames(task) })).sort((a, b) => (a.task < b.task ? -1 : a.task > b.task ? 1 : 0));
}

/** This deployment's `on:` subscriptions, as two arrays read pairwise (task i subscribes to names i); null when it has none. */
export function subscriptions(registry: TaskRegistry): { tasks: string[]; names: string[] } | null {
  const tasks: string[] = [];
  const names: string[] = [];
  for (const task of registry.values()) for (const name of onNames(task)) tasks.push(task.name), names.push(name);
  return tasks.length === 0 ? null : { tasks, names };
}

/** How many pending `on:` jobs one tick's dispatch reads and starts at most. */
export const DISPATCH_BATCH = 100;

/**
 * Starts the `on:` jobs other senders left pending for this deployment's tasks (SendEventResult
 * .pending): one read, then — when there is anything — one statement that inserts the jobs and
 * clears their pending rows (src/store/events.ts dispatchPendingEvents; once per event and task,
 * whatever number of ticks dispatch at once). `more`: the read was full, look again.
 */
export async function dispatchPendingWith(sql: Sql, registry: TaskRegistry, now: Clock, limit = DISPATCH_BATCH): Promise<{ started: number; more: boolean }> {
  const subs = subscriptions(registry);
  if (subs === null) return { started: 0, more: false };
  const found = await sql.query(pendingEvents({ ...subs, limit }));
  if (found.length === 0) return { started: 0, more: false };
  const rows: DispatchRow[] = found.map((row) => {
    const task = registry.get(String(row.task))!;
    const planned = planOnJob(task, toJson(row.data) ?? null);
    return { event_id: String(row.event_id), task: task.name, ...planned } as DispatchRow;
  });
  const [answer] = await sql.query(dispatchPendingEvents({ now, rows }));
  return { started: Number(answer?.started ?? 0), more: found.length >= limit };
}

function describeIssues(issues: readonly ErrorIssue[]): string {
  return issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ');
}

/**
 * skiplock.sendEvent: one batch — the lock (src/store/events.ts eventLock), the send (store,
 * wake, start) and cancelOn. A concurrent send of the same idempotency key that won the unique
 * index makes this one fail with 23505 before it wrote anything: its event is read and answered.
 * The batch is sent again when PostgreSQL aborted it as a deadlock (batchDeadlockSafe): its
 * cancelOn locks a parent before its children, and its wake a step before its job, the opposite
 * orders of a child's result write and of a restart.
 */
export async function sendEventWith(sql: Sql, registry: TaskRegistry, now: Clock, input: unknown, traceparent?: string): Promise<SendEventResult> {
  const event = checkEvent(input);
  const { rows, refused } = planTriggered(registry, event.name, event.data, traceparent);
  let results: Row[][];
  try {
    results = await batchDeadlockSafe(sql, [
      eventLock({ name: event.name, key: event.key, for: 'send' }),
      sendEvent({
        now, name: event.name, key: event.key, data: event.dataText, idempotencyKey: event.idempotencyKey, triggered: rows,
        refused: refused.length > 0 ? JSON.stringify(refused) : null, local: triggeredTasks(registry, event.name).map((t) => t.name),
      }),
      cancelJobsByEvent({ now, name: event.name, key: event.key, idempotencyKey: event.idempotencyKey }),
    ]);
  } catch (error) {
    if (sqlState(error) !== '23505' || event.idempotencyKey === null) throw error;
    results = [[], await sql.query(eventByIdempotencyKey({ key: event.idempotencyKey })), []];
  }
  const row = results[1]![0];
  if (!row) throw new Error('sendEvent: the statement answered no event');
  const stored = mapEvent(row);
  const created = toBool(row.inserted);
  return {
    id: stored.id, woken: stored.woken, started: stored.started, pending: stored.pending, refused: stored.refused, created,
    cancelled: created ? Number(results[2]![0]?.cancelled ?? 0) : stored.cancelled,
  };
}

export const EVENT_LIST_LIMIT = { default: 50, max: 200 } as const;

/** The filters of listEvents: what PostgreSQL could not take (a NUL, an id past bigint) is refused here, as for listJobs. */
const listEventsQuerySchema = z.object({
  name: eventNameSchema.optional(),
  key: eventKeySchema.optional(),
  // nextCursor is the last event's id: a positive bigint.
  cursor: z.string().refine(isJobId, 'not a cursor from a previous page').optional(),
});

export async function listEventsWith(sql: Sql, p: { name?: string | undefined; key?: string | undefined; cursor?: string | undefined; limit?: number | undefined }) {
  const limit = Math.min(Math.max(1, p.limit ?? EVENT_LIST_LIMIT.default), EVENT_LIST_LIMIT.max);
  const query = listEventsQuerySchema.safeParse({ name: p.name, key: p.key, cursor: p.cursor });
  if (!query.success) throw new SkiplockError('invalid_request', 'invalid event query', toIssues(query.error));
  const beforeId = p.cursor ?? null;
  const rows = await sql.query(listEvents({ name: p.name ?? null, key: p.key ?? null, beforeId, limit: limit + 1 }));
  const events = rows.slice(0, limit).map(mapEvent);
  return { events, nextCursor: rows.length > limit ? events[events.length - 1]!.id : null };
}
