import type { z } from 'zod';
import { invalidBackoff, type Backoff } from '../../core/backoff.ts';
import { SkiplockError } from '../../core/errors.ts';
import type { Job } from '../../core/types.ts';
import type { StreamWriter } from '../streams/writer.ts';
import { checkBatchOptions, type BatchContext, type BatchItem, type BatchResult } from './batch.ts';
import type { RegisteredEnqueueInput, RegisteredPayloadArgs, RegisteredTaskName } from './registered.ts';

/**
 * What a handler receives beside its payload. `ctx.enqueue` and `ctx.invoke` are typed by the
 * tasks named in `Register` (see task-types.ts; untyped until a project declares it). `Payload`
 * (the handler's payload type) is kept so that `TaskContext<P>` in user code still compiles.
 */
// eslint-disable-next-line @typescript-eslint/no-unused-vars
export interface TaskContext<Payload = unknown> {
  /**
   * Aborted when the job's timeout passes, when the invocation's deadline nears, when the job's
   * lease is lost to another worker, or when the job is cancelled. Pass it to every I/O call.
   */
  signal: AbortSignal;
  /**
   * The job's row. Its `payload` is what is stored: the JSON form of what was enqueued, before the
   * schema's transforms and defaults; the handler's first argument is the schema's parse of it.
   */
  job: Job<unknown>;
  /** 1 on the first run, 2 on the first retry, … */
  attempt: number;
  /**
   * Stable across every attempt of this job: give it to external systems (payments, e-mail) so
   * that a job run twice after a crash has its side effect once.
   */
  idempotencyKey: string;
  /** Extends this job's lease now; resolves false when the lease was lost (stop working then). */
  heartbeat(): Promise<boolean>;
  /**
   * Reports how far the job got: small JSON (at most 2 KiB; a RangeError beyond, a TypeError for
   * what JSON cannot hold), e.g. `{ done: 40, total: 100 }`. Costs no round trip: the latest value
   * is written with the next heartbeat (every leaseMs / 3) or with the result, and shown as the
   * job's `progress` and in its attempt history.
   */
  progress(value: unknown): void;
  /** Enqueues follow-up jobs (validated like any enqueue; typed by the registered tasks). */
  enqueue<Name extends RegisteredTaskName>(input: RegisteredEnqueueInput<Name>): Promise<Job>;
  /**
   * For a job fired by a schedule: the schedule's recurring state as it was when this job fired
   * (null until a run sets it). Undefined for other jobs.
   */
  state?: unknown;
  /**
   * Replaces the schedule's recurring state (JSON). It is written only if this run ends DONE, in
   * the same statement as its result, fenced like it; and only if the schedule's state is still
   * the one this run read — a run that read an outdated state cannot overwrite a newer one.
   * Throws a TypeError for a job not fired by a schedule.
   */
  setState(value: unknown): void;
  /**
   * A durable step (docs/steps.md): runs `fn` once for this job and stores its JSON result
   * (fenced like every result) before the handler goes on. When the job runs again — a retry, an
   * invocation's deadline, a crash — a completed step returns its stored result without running.
   * A step that throws follows the task's retry policy; completed steps stay completed.
   */
  step<T>(id: string, fn: (step: StepContext) => T | Promise<T>): Promise<Awaited<T>>;
  /** Leaves the invocation and resumes the job `ms` later, on whatever tick claims it: nothing waits in memory. */
  sleep(id: string, ms: number): Promise<void>;
  /** As sleep, until `date`. */
  sleepUntil(id: string, date: Date | string | number): Promise<void>;
  /**
   * Enqueues a child job of `task` and suspends this job (WAITING) until the child ends; resolves
   * with the child's result, or rejects with its error when it ends DEAD or CANCELLED. Several
   * invokes awaited together (Promise.all) are enqueued in one statement. `task` and `payload`
   * are typed by the registered tasks, as enqueue's are. A child this deployment's ticks could
   * never claim (its timeout is longer than TickOptions.maxJobTimeoutMs) or an invalid payload:
   * the promise rejects with a PermanentError, and nothing is enqueued.
   */
  invoke<R = unknown, Name extends RegisteredTaskName = RegisteredTaskName>(
    id: string,
    task: Name,
    ...payload: RegisteredPayloadArgs<Name>
  ): Promise<R>;
  /**
   * Versioning a workflow (docs/steps.md, "Changing a workflow's code"): true on a run that reaches
   * this point fresh (a marker `patched:<id>` is recorded, with the next step write: no round trip
   * of its own), false on a replay of a run that went past this point before the patch existed.
   * `if (ctx.patched('fraud-check')) await ctx.step('fraud-check', …)`. The same id answers the
   * same within a run.
   */
  patched(id: string): boolean;
  /**
   * Suspends this job until an event of this name (and key) arrives, and resolves with its
   * `{ data, eventId }` — or with null once `timeoutMs` passes first. Matches the first such
   * event stored after the job was created that no earlier wait of this job took: one sent before
   * the handler got here is not lost. While it waits the job holds no invocation (WAITING; with a
   * timeout, QUEUED until it, like a sleep). A step: on replay it returns the stored event.
   */
  waitForEvent<D = unknown>(id: string, options: WaitForEventOptions): Promise<{ data: D; eventId: string } | null>;
  /**
   * Suspends this job until an event matching any of `alternatives` (1 to 20 `{ event, key? }`,
   * no two the same) arrives, and resolves with the first: `{ event, key, data, eventId }` — or
   * with null once `timeoutMs` passes first. "First" is the earliest stored, as for waitForEvent:
   * stored after the job was created, not taken by another wait of this job, one sent before the
   * handler got here included. The other alternatives end with it (an event of theirs sent later
   * stays for another wait). One step: on replay it returns the stored answer. docs/steps.md.
   */
  waitForAny<D = unknown>(id: string, alternatives: readonly EventAlternative[], options?: WaitForAnyOptions): Promise<AnyEvent<D> | null>;
  /**
   * A callback URL (docs/steps.md, "Callbacks"), recorded as a step: the same URL on every
   * replay. A POST of JSON to it, with no bearer token, completes the callback once; wait for it
   * with waitForCallback(id). Needs createSkiplock's `callbacks` option.
   */
  createCallback(id: string, options?: { timeoutMs?: number }): Promise<{ url: string }>;
  /** Suspends this job until the callback `id` (createCallback) is called: its `{ data }`, or null after its timeout. */
  waitForCallback<D = unknown>(id: string): Promise<{ data: D } | null>;
  /**
   * A stream of this run's output (docs/streams.md), read by skiplock.readStream while the job
   * runs: `write(chunk)` buffers a chunk (JSON or a string, at most 64 KiB) with no round trip;
   * chunks are stored in order within 100 ms, at every step boundary and before the job is DONE.
   * A replayed or retried run does not store a chunk twice (the first write wins). `name`:
   * 1 to 64 of A-Z a-z 0-9 _ . : - (default 'default').
   */
  stream(name?: string): StreamWriter;
}

export interface WaitForEventOptions {
  /** The event name (sendEvent's `name`). */
  event: string;
  /** Only events of this key; without one, every event of the name. */
  key?: string;
  /** Resolve null after this long (ms, up to 365 days). Default: wait for ever. */
  timeoutMs?: number;
}

/** One alternative of ctx.waitForAny. */
export interface EventAlternative {
  /** The event name (sendEvent's `name`). */
  event: string;
  /** Only events of this key; without one, every event of the name. */
  key?: string;
}

export interface WaitForAnyOptions {
  /** Resolve null after this long (ms, up to 365 days). Default: wait for ever. */
  timeoutMs?: number;
}

/** What ctx.waitForAny resolves with: the event that came first, and which alternative it matched. */
export interface AnyEvent<D = unknown> {
  /** Its name. */
  event: string;
  /** Its key (null: sent without one). */
  key: string | null;
  data: D;
  eventId: string;
}

/** A cancelOn entry of defineTask: an event of this name (and key) cancels the task's job. */
export interface CancelOnEvent<Payload = unknown> {
  event: string;
  /** A key, or the key computed from the job's payload; without one, any event of the name. */
  key?: string | KeyOf<Payload>;
}
/** A key function, checked bivariantly (as a method is): a task of any payload is still a Task. */
type KeyOf<Payload> = { bivarianceHack(payload: Payload): string }['bivarianceHack'];

/** What a step's fn receives. */
export interface StepContext {
  /** `skiplock:<job id>:<step id>`: stable across every run of this step; give it to external systems. */
  idempotencyKey: string;
  /** The job's signal (see TaskContext.signal). */
  signal: AbortSignal;
}

export interface TaskDefinition<Schema extends z.ZodType = z.ZodType, Name extends string = string> {
  /** Unique task name, stored in job.task. defineTask keeps it as a literal type (typed enqueue). */
  name: Name;
  /** zod schema of the payload: checked before enqueue writes anything, and again before a run. */
  payload: Schema;
  /** The work. Resolve with a JSON-serializable result; throw to fail (PermanentError: no retry). */
  handler(payload: z.output<Schema>, ctx: TaskContext<z.output<Schema>>): unknown;
  /** Per-attempt time limit in ms; the signal aborts when it passes. Default 10 000. */
  timeoutMs?: number;
  /** Attempts before the job goes to DEAD. Default 5. */
  maxAttempts?: number;
  /**
   * Retry delays. Default 10 s·2^(attempt−1), capped at 1 h, jittered down by up to 25%. Options
   * are checked here; a function that throws or returns no finite number gets the default for
   * that attempt (and last_error says so); any delay is clamped to 0…365 days.
   */
  backoff?: Backoff;
  /** Default priority of its jobs; higher runs first. Default 0. */
  priority?: number;
  /**
   * At most `limit` jobs of this task RUNNING at once; per key when `key` is given (one at a time
   * per tenant: `{ limit: 1, key: (p) => p.tenantId }`), and then at most `globalLimit` over all
   * keys when that is given too. The key is computed from the payload at enqueue.
   */
  concurrency?: ConcurrencyLimit<z.output<Schema>>;
  /**
   * At most `limit` jobs of a key start in any window of `periodMs` (a sliding window, measured on
   * the database clock); per key when `key` is given. A job over the limit waits, QUEUED, until
   * its key allows.
   */
  rateLimit?: RateLimit<z.output<Schema>>;
  /**
   * Fair share (docs/flow-control.md, "Fair share"): within a priority level, due jobs of different
   * keys are claimed in turn, one key after another, so a key with a huge backlog delays another
   * key's job by a bounded number of claims. `key` names the tenant, from the payload (1–255
   * characters); an enqueue's `fairnessKey` overrides it. Without `key`, only jobs enqueued with a
   * `fairnessKey` take turns.
   */
  fairness?: Fairness<z.output<Schema>>;
  /** Batch handlers (docs/flow-control.md, "Batch handlers"). */
  batch?: BatchOptions<z.output<Schema>>;
  /**
   * Events that start a job of this task (docs/steps.md, "Events"): each event of one of these
   * names enqueues one job with the event's data as payload (checked by `payload`; a refusal is
   * reported in the send's answer and stored with the event), once per event.
   */
  on?: string | readonly string[];
  /** Events that cancel a job of this task (QUEUED, WAITING or sleeping: CANCELLED; RUNNING: asked to stop), children included. */
  cancelOn?: readonly CancelOnEvent<z.output<Schema>>[];
}

/**
 * defineTask's form for a batch task: `batch` and a handler of the items. Flow control per job
 * (concurrency, rateLimit, fairness) does not apply to a call of many jobs and is refused.
 */
export interface BatchTaskDefinition<Schema extends z.ZodType = z.ZodType, Name extends string = string>
  extends Omit<TaskDefinition<Schema, Name>, 'handler' | 'concurrency' | 'rateLimit' | 'fairness' | 'batch'> {
  batch: BatchOptions<z.output<Schema>>;
  handler(items: BatchItem<z.output<Schema>>[], ctx: BatchContext): Promise<BatchResult | void> | BatchResult | void;
  concurrency?: never;
  rateLimit?: never;
  fairness?: never;
}

export interface ConcurrencyLimit<Payload = unknown> {
  /** Jobs RUNNING at once (per key when `key` is given): an integer from 1 to 100 000. */
  limit: number;
  /** The key a job counts against, from its payload: 1–255 characters. */
  key?(payload: Payload): string;
  /** With `key`: at most this many jobs of the task RUNNING over all keys. */
  globalLimit?: number;
}

export interface Fairness<Payload = unknown> {
  /** The key a job takes turns under: 1–255 characters, from its payload. */
  key?(payload: Payload): string;
}

export interface BatchOptions<Payload = unknown> {
  /** At most this many jobs per call; a batch runs as soon as this many are due. */
  maxSize: number;
  /** A batch also runs once its oldest due job has waited this long (ms). */
  maxWaitMs: number;
  /** A batch holds jobs of one key, from their payloads: 1–255 characters. */
  key?(payload: Payload): string;
}

export interface RateLimit<Payload = unknown> {
  /** Starts per window (per key when `key` is given): an integer from 1 to 100 000. */
  limit: number;
  /** The window, in ms: an integer from 1 to 31 days. */
  periodMs: number;
  key?(payload: Payload): string;
}

/**
 * A task as defineTask returns it. The type parameters keep its name and payload schema, so that
 * `enqueue` can be checked against the registered tasks (EnqueueInputOf in task-types.ts); plain
 * `Task` is any task.
 */
export type Task<Name extends string = string, Schema extends z.ZodType = z.ZodType> = TaskDefinition<Schema, Name> & {
  timeoutMs: number;
  maxAttempts: number;
  priority: number;
};

export const TASK_DEFAULTS = { timeoutMs: 10_000, maxAttempts: 5, priority: 0 } as const;

/**
 * Declares a task; options are checked now, so a bad definition fails at startup. With `batch`
 * (src/runtime/tasks/batch.ts), the handler receives up to `batch.maxSize` items per call.
 */
export function defineTask<const Name extends string, Schema extends z.ZodType>(definition: BatchTaskDefinition<Schema, Name>): Task<Name, Schema>;
export function defineTask<const Name extends string, Schema extends z.ZodType>(definition: TaskDefinition<Schema, Name>): Task<Name, Schema>;
export function defineTask<const Name extends string, Schema extends z.ZodType>(definition: TaskDefinition<Schema, Name> | BatchTaskDefinition<Schema, Name>): Task<Name, Schema> {
  const task = { ...TASK_DEFAULTS, ...definition } as unknown as Task<Name, Schema>;
  if (!/^[\w.:-]{1,200}$/.test(task.name)) throw new TypeError(`task name ${JSON.stringify(task.name)} must be 1–200 of [A-Za-z0-9_.:-]`);
  if (!Number.isInteger(task.timeoutMs) || task.timeoutMs < 1) throw new TypeError(`${task.name}: timeoutMs must be a positive integer`);
  if (!Number.isInteger(task.maxAttempts) || task.maxAttempts < 1 || task.maxAttempts > 1000)
    throw new TypeError(`${task.name}: maxAttempts must be an integer from 1 to 1000`);
  if (!Number.isInteger(task.priority) || Math.abs(task.priority) > 32767) throw new TypeError(`${task.name}: priority must be a smallint`);
  const backoffProblem = task.backoff === undefined ? undefined : invalidBackoff(task.backoff);
  if (backoffProblem) throw new TypeError(`${task.name}: ${backoffProblem}`);
  checkFlowControl(task);
  checkEventOptions(task);
  checkBatchOptions(task as unknown as { name: string } & Record<string, unknown>);
  return task;
}

const EVENT_NAME = /^[\w.:/-]{1,200}$/;

function checkEventOptions(task: Task) {
  const names = task.on === undefined ? [] : typeof task.on === 'string' ? [task.on] : task.on;
  if (task.on !== undefined && typeof task.on !== 'string' && !Array.isArray(task.on)) throw new TypeError(`${task.name}: on must be an event name or a list of them`);
  for (const name of names) if (typeof name !== 'string' || !EVENT_NAME.test(name)) throw new TypeError(`${task.name}: on: ${JSON.stringify(name)} is not an event name (1–200 of letters, digits and _ . : / -)`);
  if (task.cancelOn === undefined) return;
  if (!Array.isArray(task.cancelOn)) throw new TypeError(`${task.name}: cancelOn must be a list of { event, key? }`);
  for (const c of task.cancelOn as readonly CancelOnEvent[]) {
    if (typeof c !== 'object' || c === null || typeof c.event !== 'string' || !EVENT_NAME.test(c.event))
      throw new TypeError(`${task.name}: cancelOn entries need an event name (1–200 of letters, digits and _ . : / -)`);
    if (c.key !== undefined && typeof c.key !== 'string' && typeof c.key !== 'function') throw new TypeError(`${task.name}: cancelOn key must be a string or a function (payload) => string`);
  }
}

const MAX_FLOW_LIMIT = 100_000;
const MAX_PERIOD_MS = 31 * 24 * 3600 * 1000;

function checkFlowControl(task: Task) {
  const isLimit = (n: unknown) => Number.isInteger(n) && (n as number) >= 1 && (n as number) <= MAX_FLOW_LIMIT;
  const checkKey = (option: string, key: unknown) => {
    if (key !== undefined && typeof key !== 'function') throw new TypeError(`${task.name}: ${option}.key must be a function (payload) => string`);
  };
  const known = (option: string, value: object, names: readonly string[]) => {
    const extra = Object.keys(value).filter((k) => !names.includes(k));
    if (extra.length > 0) throw new TypeError(`${task.name}: ${option} has unknown option ${extra.map((k) => JSON.stringify(k)).join(', ')} (expected ${names.join(', ')})`);
  };
  const { concurrency, rateLimit, fairness } = task;
  if (fairness !== undefined) {
    if (typeof fairness !== 'object' || fairness === null) throw new TypeError(`${task.name}: fairness must be { key? }`);
    known('fairness', fairness, ['key']);
    checkKey('fairness', fairness.key);
  }
  if (concurrency !== undefined) {
    if (typeof concurrency !== 'object' || concurrency === null) throw new TypeError(`${task.name}: concurrency must be { limit, key?, globalLimit? }`);
    known('concurrency', concurrency, ['limit', 'key', 'globalLimit']);
    if (!isLimit(concurrency.limit)) throw new TypeError(`${task.name}: concurrency.limit must be an integer from 1 to ${MAX_FLOW_LIMIT}`);
    checkKey('concurrency', concurrency.key);
    if (concurrency.globalLimit !== undefined) {
      if (!isLimit(concurrency.globalLimit)) throw new TypeError(`${task.name}: concurrency.globalLimit must be an integer from 1 to ${MAX_FLOW_LIMIT}`);
      if (concurrency.key === undefined) throw new TypeError(`${task.name}: concurrency.globalLimit needs concurrency.key (without a key, limit is already the task's global limit)`);
    }
  }
  if (rateLimit !== undefined) {
    if (typeof rateLimit !== 'object' || rateLimit === null) throw new TypeError(`${task.name}: rateLimit must be { limit, periodMs, key? }`);
    known('rateLimit', rateLimit, ['limit', 'periodMs', 'key']);
    if (!isLimit(rateLimit.limit)) throw new TypeError(`${task.name}: rateLimit.limit must be an integer from 1 to ${MAX_FLOW_LIMIT}`);
    if (!Number.isInteger(rateLimit.periodMs) || rateLimit.periodMs < 1 || rateLimit.periodMs > MAX_PERIOD_MS)
      throw new TypeError(`${task.name}: rateLimit.periodMs must be an integer from 1 to ${MAX_PERIOD_MS} (31 days)`);
    checkKey('rateLimit', rateLimit.key);
  }
}

export type TaskRegistry = ReadonlyMap<string, Task>;

export function createRegistry(tasks: readonly Task[]): TaskRegistry {
  const registry = new Map<string, Task>();
  for (const task of tasks) {
    if (registry.has(task.name)) throw new TypeError(`task ${task.name} is defined twice`);
    registry.set(task.name, task);
  }
  return registry;
}

export function requireTask(registry: TaskRegistry, name: string): Task {
  const task = registry.get(name);
  if (!task) throw new SkiplockError('unknown_task', `unknown task ${JSON.stringify(name)}`);
  return task;
}
