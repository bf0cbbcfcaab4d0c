/**
 * Batch handlers (issue 35 item 2, docs/flow-control.md "Batch handlers"): a task defined with
 * `batch: { maxSize, maxWaitMs, key? }` gets up to maxSize of its due jobs in one handler call.
 * Each item is still a job (its own id, attempts, result, history, DEAD); only the call is shared.
 * Here: the types a batch handler sees, and the checks defineTask makes of the option.
 */
import type { Job } from '../../core/types.ts';
import type { RegisteredEnqueueInput, RegisteredTaskName } from './registered.ts';

/** A task's `batch` option (task.ts BatchOptions), as read here. */
interface BatchOptions {
  maxSize: number;
  maxWaitMs: number;
  key?: unknown;
}

/** One item of a call: the job's id and its payload, parsed by the task's schema. */
export interface BatchItem<Payload = unknown> {
  id: string;
  payload: Payload;
}

/** What a batch handler may return: a result per item it names (the others end DONE with a null result). */
export type BatchResult = ReadonlyArray<{ id: string; result?: unknown }>;

/**
 * What a batch handler receives beside its items. No durable steps, sleeps, invokes or waits:
 * those are per job (a handler that needs them is a plain task).
 */
export interface BatchContext {
  /**
   * Aborted when the call's timeout (the task's timeoutMs) passes, when the invocation's deadline
   * nears, or when the items' lease is lost to another worker. Pass it to every I/O call.
   */
  signal: AbortSignal;
  /** The items' job rows, in the order of `items` (each its own `attempts`, `idempotencyKey`, …). */
  jobs: readonly Job<unknown>[];
  /**
   * Fails one item: it is retried alone, with its own attempts and backoff (DEAD at its last
   * attempt, or at once for a PermanentError); the other items are not affected. A TypeError for
   * an id that is not an item of this call.
   */
  fail(id: string, error: unknown): void;
  /** Extends every item's lease now; resolves false when one was lost (the call is stopped then). */
  heartbeat(): Promise<boolean>;
  /** Enqueues follow-up jobs (validated like any enqueue; typed by the registered tasks). */
  enqueue<Name extends RegisteredTaskName>(input: RegisteredEnqueueInput<Name>): Promise<Job>;
}

export const MAX_BATCH_SIZE = 1000;

/** The task's batch options, or undefined for a task of one job per call. */
export function batchOf(task: object | undefined): BatchOptions | undefined {
  return (task as { batch?: BatchOptions } | undefined)?.batch;
}

/** defineTask's checks of `batch` (a TypeError for a bad option, as for the others). */
export function checkBatchOptions(task: { name: string } & Record<string, unknown>): void {
  const batch = task.batch as BatchOptions | undefined;
  if (batch === undefined) return;
  const name = task.name;
  if (typeof batch !== 'object' || batch === null) throw new TypeError(`${name}: batch must be { maxSize, maxWaitMs, key? }`);
  const extra = Object.keys(batch).filter((k) => !['maxSize', 'maxWaitMs', 'key'].includes(k));
  if (extra.length > 0) throw new TypeError(`${name}: batch has unknown option ${extra.map((k) => JSON.stringify(k)).join(', ')} (expected maxSize, maxWaitMs, key)`);
  if (!Number.isInteger(batch.maxSize) || batch.maxSize < 1 || batch.maxSize > MAX_BATCH_SIZE) throw new TypeError(`${name}: batch.maxSize must be an integer from 1 to ${MAX_BATCH_SIZE}`);
  if (!Number.isInteger(batch.maxWaitMs) || batch.maxWaitMs < 0 || batch.maxWaitMs > 2_147_483_647)
    throw new TypeError(`${name}: batch.maxWaitMs must be an integer of ms, 0 or more`);
  if (batch.key !== undefined && typeof batch.key !== 'function') throw new TypeError(`${name}: batch.key must be a function (payload) => string`);
  for (const option of ['concurrency', 'rateLimit', 'fairness'] as const) {
    if (task[option] !== undefined)
      throw new TypeError(`${name}: batch cannot be combined with ${option} (a call runs many jobs at once; limit the calls' work inside the handler)`);
  }
}
