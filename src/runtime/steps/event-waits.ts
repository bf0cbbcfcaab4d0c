/**
 * ctx.waitForEvent, ctx.waitForAny, ctx.createCallback and ctx.waitForCallback for one run of a job: durable
 * steps (src/runtime/steps/steps.ts provides reach, the fence and the suspension) whose statements are
 * in src/store/event-waits.ts. A wait that finds its event already stored returns at once; otherwise
 * the run leaves the invocation with a `wait` outcome (WAITING, or QUEUED until its timeout).
 */
import { permanentTypeError, SkiplockError } from '../../core/errors.ts';
import { findUnstorableJson } from '../../core/json.ts';
import type { Outcome } from '../../core/state.ts';
import type { StepKind } from '../../core/types.ts';
import type { Clock } from '../../store/clock.ts';
import { eventLock, eventWaitLocks } from '../../store/events.ts';
import { createCallbackStep, readCallbackStep, waitForAnyEvent, waitForEvent, type WaitRow } from '../../store/event-waits.ts';
import { toDate } from '../../store/rows.ts';
import type { Sql, Statement } from '../../store/sql.ts';
import type { StepFence } from '../../store/steps.ts';
import { callbacksNotConfigured, type CallbackSigner } from '../events/callback-token.ts';
import { STEP_LIMITS, type StoredStep } from './types.ts';
import { utf8Length } from '../../core/stored-json.ts';
import type { AnyEvent, EventAlternative, WaitForAnyOptions, WaitForEventOptions } from '../tasks/task.ts';
import { checkAlternatives, checkEventAndKey } from './event-alternatives.ts';

/** The longest wait timeout: 365 days (as the longest sleep). */
const MAX_TIMEOUT_MS = 365 * 24 * 3600 * 1000;

export interface WaitHelpers {
  sql: Sql;
  jobId: string;
  now(): Clock;
  reach(id: unknown, kind: Exclude<StepKind, 'patch'>): { seq: number; row: StoredStep | undefined };
  /** A recorded step by id (the claim's read), without taking a place in the order. */
  recorded(id: string): StoredStep | undefined;
  fence(): StepFence;
  /** Before a step write: the run's stream chunks flushed (false: the lease was lost). */
  flushStreams(): Promise<boolean>;
  leave<T>(outcome: Outcome): Promise<T>;
  /** The lease was lost: the run is stopped; the promise never settles. */
  lost<T>(): Promise<T>;
  /** Counts the output a wait hands the handler toward the job's total; throws a PermanentError past it. */
  received(what: string, seq: number, output: unknown, recorded: boolean): void;
  callbacks: CallbackSigner | undefined;
}

export interface EventWaits {
  waitForEvent(id: string, options: WaitForEventOptions): Promise<{ data: unknown; eventId: string } | null>;
  waitForAny(id: string, alternatives: readonly EventAlternative[], options?: WaitForAnyOptions): Promise<AnyEvent | null>;
  createCallback(id: string, options?: { timeoutMs?: number }): Promise<{ url: string }>;
  waitForCallback(id: string): Promise<{ data: unknown } | null>;
}

function checkTimeout(what: string, timeoutMs: unknown): number | null {
  if (timeoutMs === undefined) return null;
  if (typeof timeoutMs !== 'number' || !Number.isInteger(timeoutMs) || timeoutMs < 0 || timeoutMs > MAX_TIMEOUT_MS)
    throw permanentTypeError(`${what}: timeoutMs must be an integer from 0 to ${MAX_TIMEOUT_MS} (365 days), got ${String(timeoutMs)}`);
  return timeoutMs;
}

function checkWaitOptions(id: string, options: WaitForEventOptions): { name: string; key: string | null; timeoutMs: number | null } {
  const what = `ctx.waitForEvent(${JSON.stringify(id)})`;
  if (typeof options !== 'object' || options === null) throw permanentTypeError(`${what}: the second argument must be { event, key?, timeoutMs? }`);
  return { ...checkEventAndKey(what, options), timeoutMs: checkTimeout(what, options.timeoutMs) };
}

/**
 * A callback POST's data, as the JSON text its step will store (null for none), checked before
 * anything is written so the wait stays open for a correct POST: at most one step's output
 * (STEP_LIMITS.maxOutputBytes, 256 KiB of JSON), else SkiplockError payload_too_large (HTTP 413);
 * and only what JSON and jsonb can hold, else SkiplockError invalid_request (HTTP 400): a NUL or a
 * lone surrogate in a string or a key (PostgreSQL refuses the whole statement), a BigInt, a cycle.
 */
export function callbackDataText(data: unknown): string | null {
  if (data === undefined) return null;
  const refuse = (message: string, path: (string | number)[] = []): never => {
    throw new SkiplockError('invalid_request', `invalid callback data: ${message}${path.length > 0 ? ` at ${path.join('.')}` : ''}`, [{ path, message }]);
  };
  let text: string | undefined;
  try {
    text = JSON.stringify(data);
  } catch {
    return refuse('it is not JSON-serializable');
  }
  if (text === undefined) return refuse('it is not JSON-serializable');
  const bytes = utf8Length(text);
  if (bytes > STEP_LIMITS.maxOutputBytes)
    throw new SkiplockError('payload_too_large', `the callback's data is ${bytes} bytes of JSON, more than the ${STEP_LIMITS.maxOutputBytes} a step's output may be`);
  const problem = findUnstorableJson(JSON.parse(text));
  if (problem) refuse(`${problem.message}, which PostgreSQL cannot store`, problem.path);
  return text;
}

/** Suspends for a wait still waiting: until its timeout (QUEUED then), or for ever (WAITING). */
const waitOutcome = (wakeAt: unknown): Outcome => ({ kind: 'wait', runAt: wakeAt === null || wakeAt === undefined ? null : toDate(wakeAt).toISOString(), events: true });

/** The waits of one run: what its event waits and callbacks share. */
interface WaitState {
  /** Callback steps this run created (not yet in the claim's read), with their seq. */
  created: Map<string, number>;
  /**
   * The event waits of this run, one after another in call order (Promise.all of several waits):
   * each statement sees what the one before it took, so parallel waits on one name take their
   * own events in the order they were called, as the send completes a job's first waiting step
   * (src/store/events.ts sendEvent). `queue` is the last wait's statement.
   */
  queue: Promise<unknown>;
  /** The earliest timeout of the waits of this run left waiting (null: none of them has one). */
  earliest: Date | null | undefined;
}

export function createEventWaits(h: WaitHelpers): EventWaits {
  const waits: WaitState = { created: new Map(), queue: Promise.resolve(), earliest: undefined };
  return {
    waitForEvent: (id, options) => waitForEventStep(h, waits, id, options),
    waitForAny: (id, alternatives, options) => waitForAnyStep(h, waits, id, alternatives, options),
    createCallback: (id, options) => createCallback(h, waits, id, options),
    waitForCallback: (id) => waitForCallback(h, waits, id),
  };
}

/** A wait's outcome as the handler gets it, counted toward the job's outputs first. */
function taken<T>(h: WaitHelpers, what: string, seq: number, output: unknown, recorded: boolean): T | null {
  h.received(what, seq, output, recorded);
  return (output ?? null) as T | null;
}

/** ctx.waitForEvent. */
async function waitForEventStep(h: WaitHelpers, waits: WaitState, id: string, options: WaitForEventOptions): Promise<{ data: unknown; eventId: string } | null> {
  const wait = checkWaitOptions(id, options);
  return eventWait(h, waits, id, 'event', (seq, isNew) => [
    eventLock({ name: wait.name, key: wait.key, for: 'wait' }),
    waitForEvent({ ...h.fence(), id, seq, isNew, name: wait.name, key: wait.key, timeoutMs: wait.timeoutMs }),
  ]);
}

/** ctx.waitForAny: one step over several alternatives, their locks taken in one order (eventWaitLocks). */
async function waitForAnyStep(h: WaitHelpers, waits: WaitState, id: string, alternatives: readonly EventAlternative[], options?: WaitForAnyOptions): Promise<AnyEvent | null> {
  const what = `ctx.waitForAny(${JSON.stringify(id)})`;
  const checked = checkAlternatives(what, alternatives);
  if (options !== undefined && (typeof options !== 'object' || options === null)) throw permanentTypeError(`${what}: the third argument must be { timeoutMs? }`);
  const timeoutMs = checkTimeout(what, options?.timeoutMs);
  return eventWait(h, waits, id, 'any-event', (seq, isNew) => [
    eventWaitLocks(checked),
    waitForAnyEvent({ ...h.fence(), id, seq, isNew, alternatives: checked, timeoutMs }),
  ]);
}

/**
 * An event wait of either kind, its input checked: a recorded done step answers; otherwise its
 * batch (the locks, then the wait's statement), in this run's call order, answers the event found
 * or leaves the run waiting (at the earliest timeout of the run's waits).
 */
async function eventWait<T>(h: WaitHelpers, waits: WaitState, id: string, kind: 'event' | 'any-event', batch: (seq: number, isNew: boolean) => Statement[]): Promise<T | null> {
  const { seq, row } = h.reach(id, kind);
  const what = `the event wait ${JSON.stringify(id)} took`;
  if (row?.status === 'done') return taken(h, what, seq, row.output, true);
  // Queued at once (the waits called together are recorded in call order), the run's stream chunks flushed first.
  const turn = waits.queue.then(async () => ((await h.flushStreams()) ? h.sql.batch(batch(seq, row === undefined)) : []));
  waits.queue = turn.catch(() => undefined);
  const [, rows] = await turn;
  const answer = rows?.[0] as WaitRow | undefined;
  if (!answer || Number(answer.held) !== 1) return h.lost();
  if (answer.status === 'done') return taken(h, what, seq, answer.output, false);
  // Still waiting: the run leaves once the waits called after this one are recorded too, and
  // wakes at the earliest of their timeouts (a wait without one leaves the job WAITING).
  const wakeAt = answer.wake_at === null || answer.wake_at === undefined ? null : toDate(answer.wake_at);
  if (wakeAt !== null && (waits.earliest === undefined || waits.earliest === null || wakeAt < waits.earliest)) waits.earliest = wakeAt;
  else waits.earliest ??= null;
  await waits.queue;
  return h.leave(waitOutcome(waits.earliest));
}

/** ctx.createCallback: the callback step recorded (once), and its signed URL. */
async function createCallback(h: WaitHelpers, waits: WaitState, id: string, options: { timeoutMs?: number } = {}): Promise<{ url: string }> {
  const what = `ctx.createCallback(${JSON.stringify(id)})`;
  if (typeof options !== 'object' || options === null) throw permanentTypeError(`${what}: the second argument must be { timeoutMs? }`);
  const timeoutMs = checkTimeout(what, options.timeoutMs);
  if (!h.callbacks) throw callbacksNotConfigured();
  const { seq, row } = h.reach(id, 'callback');
  if (!row) {
    if (!(await h.flushStreams())) return h.lost();
    const [written] = await h.sql.query(createCallbackStep({ ...h.fence(), id, seq, timeoutMs }));
    if (!written) return h.lost();
  }
  waits.created.set(id, seq);
  return { url: await h.callbacks.urlFor(h.jobId, id) };
}

/** ctx.waitForCallback: the data of a callback this run or an earlier one created, once POSTed. */
async function waitForCallback(h: WaitHelpers, waits: WaitState, id: string): Promise<{ data: unknown } | null> {
  const row = h.recorded(id);
  if ((row === undefined || row.kind !== 'callback') && !waits.created.has(id))
    throw permanentTypeError(`ctx.waitForCallback(${JSON.stringify(id)}): no callback of that id: call ctx.createCallback(${JSON.stringify(id)}) first`);
  const what = `the callback ${JSON.stringify(id)}`;
  const seq = row?.kind === 'callback' ? row.seq : waits.created.get(id)!;
  if (row?.status === 'done') return taken(h, what, seq, row.output, true);
  const [now] = await h.sql.query(readCallbackStep({ now: h.now(), jobId: h.jobId, id }));
  if (now?.status === 'done') return taken(h, what, seq, now.output, false);
  return h.leave(waitOutcome(now?.wake_at));
}
