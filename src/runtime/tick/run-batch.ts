/**
 * Runs one call of a batch task (src/runtime/tasks/batch.ts) over the jobs claimed together, and
 * turns however it ends into an Outcome per item: each item is still a job, so the tick writes its
 * result fenced by its own locked_by + attempt, exactly as a single job's (flush.ts).
 *
 * The call has one AbortSignal: the task's timeout (the items' shortest), the invocation's
 * deadline and a lost lease abort it. An item's cancel does not stop the others: the item ends
 * CANCELLED unless the handler returned a result for it. An item whose stored payload no longer
 * parses is DEAD at once, alone; the others run.
 */
import { describeError } from '../../core/errors.ts';
import { cancelled, dead, done, failed, released, type Outcome } from '../../core/state.ts';
import { toStoredJson } from '../../core/stored-json.ts';
import type { Job } from '../../core/types.ts';
import { batchOf, type BatchContext, type BatchItem } from '../tasks/batch.ts';
import type { Task, TaskRegistry } from '../tasks/task.ts';
import { ADOPT_BATCH_LIMIT, adoptStrandedBatchJobs as adoptStranded, type BatchRow } from '../../store/batches.ts';
import type { Sql } from '../../store/sql.ts';
import { createProgressSlot } from './progress.ts';
import { JobStoppedError, type RunDeps, type RunningJob, type Settled, type StopReason } from './run-job.ts';

/** A running call: one handle per item (the tick's running map holds those), and the call's end. */
export interface RunningBatch {
  jobs: readonly Job[];
  items: RunningJob[];
  /** Resolves once every item's outcome is decided. */
  settled: Promise<void>;
}

interface Call {
  readonly task: Task;
  readonly jobs: readonly Job[];
  readonly deps: RunDeps;
  readonly controller: AbortController;
  /** Per item: resolves its handle's `settled`. */
  readonly resolvers: Map<string, (s: Settled) => void>;
  /** Items failed by ctx.fail (or at once: an unparsable payload), with their outcome. */
  readonly failures: Map<string, Outcome>;
  readonly cancelled: Set<string>;
  readonly lost: Set<string>;
  /** The items the handler receives (their payloads parsed). */
  readonly runnable: Job[];
  reason: StopReason | undefined;
  ended: boolean;
  timer: ReturnType<typeof setTimeout> | undefined;
  abandonTimer: ReturnType<typeof setTimeout> | undefined;
}

/** Starts the call over `jobs` (all of `task`, a batch task). */
export function runBatch(task: Task, jobs: readonly Job[], deps: RunDeps): RunningBatch {
  const call: Call = {
    task, jobs, deps, controller: new AbortController(), resolvers: new Map(), failures: new Map(), cancelled: new Set(), lost: new Set(),
    runnable: [], reason: undefined, ended: false, timer: undefined, abandonTimer: undefined,
  };
  const items = jobs.map((job): RunningJob => {
    const settled = new Promise<Settled>((resolve) => call.resolvers.set(job.id, resolve));
    return { job, settled, stop: (why) => stopItem(call, job, why), progress: createProgressSlot() };
  });
  const settled = Promise.all(items.map((i) => i.settled)).then(() => {});
  const parsed: unknown[] = [];
  for (const job of jobs) {
    const payload = task.payload.safeParse(job.payload);
    if (payload.success) {
      call.runnable.push(job);
      parsed.push(payload.data);
    } else call.failures.set(job.id, dead(new Error(`invalid payload: ${payload.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ')}`)));
  }
  if (call.runnable.length === 0) {
    finishCall(call, (job) => call.failures.get(job.id)!);
    return { jobs, items, settled };
  }
  call.timer = setTimeout(() => stopCall(call, 'timeout'), Math.min(...call.runnable.map((j) => j.timeoutMs)));
  const batchItems: BatchItem[] = call.runnable.map((job, i) => ({ id: job.id, payload: parsed[i] }));
  const handler = task.handler as unknown as (items: BatchItem[], ctx: BatchContext) => unknown;
  Promise.resolve()
    .then(() => handler(batchItems, batchContext(call)))
    .then(
      (value) => {
        let answer: Map<string, unknown> | Error;
        try {
          answer = readAnswer(call, value);
        } catch (problem) {
          answer = new TypeError(`the batch handler's answer could not be read: ${describeError(problem)}`);
        }
        finishCall(call, (job) => (answer instanceof Error ? afterFailure(call, job, answer) : afterSuccess(call, job, answer)));
      },
      (error: unknown) => finishCall(call, (job) => afterFailure(call, job, error)),
    );
  return { jobs, items, settled };
}

/** Whether `task` runs its jobs as batches here. */
export const isBatchTask = (task: Task | undefined): boolean => batchOf(task) !== undefined;

function batchContext(call: Call): BatchContext {
  const ids = new Set(call.runnable.map((j) => j.id));
  return {
    signal: call.controller.signal,
    jobs: call.runnable,
    fail(id, error) {
      if (!ids.has(String(id))) throw new TypeError(`ctx.fail: ${JSON.stringify(id)} is not an item of this call`);
      const job = call.runnable.find((j) => j.id === String(id))!;
      if (!call.ended && !call.failures.has(job.id)) call.failures.set(job.id, failed(job, error, call.task.backoff));
    },
    heartbeat: async () => {
      const held = await (call.deps.heartbeatJobs?.(call.runnable) ?? Promise.all(call.runnable.map((j) => call.deps.heartbeat(j))));
      call.runnable.forEach((job, i) => held[i] || call.lost.add(job.id));
      if (held.every(Boolean)) return true;
      stopCall(call, 'lease-lost');
      return false;
    },
    enqueue: call.deps.enqueue,
  };
}

/** A stop asked of one item (the tick's heartbeat, its deadline, a cancel): a cancel stays the item's; anything else stops the call. */
function stopItem(call: Call, job: Job, why: StopReason): void {
  if (why === 'cancelled') {
    call.cancelled.add(job.id);
    return;
  }
  if (why === 'lease-lost') call.lost.add(job.id);
  stopCall(call, why);
}

/** Aborts the call's signal (the first reason wins); a handler still running abandonAfterMs later is abandoned. */
function stopCall(call: Call, why: StopReason): void {
  if (call.reason || call.ended) return;
  call.reason = why;
  call.controller.abort(new JobStoppedError(why, stopMessage(why, call)));
  call.abandonTimer = setTimeout(() => finishCall(call, (job) => afterAbandon(call, job, why)), call.deps.abandonAfterMs);
}

/** Decides every item's outcome, once: failures and lost leases first, then `decide` for the rest. */
function finishCall(call: Call, decide: (job: Job) => Settled): void {
  if (call.ended) return;
  call.ended = true;
  clearTimeout(call.timer);
  clearTimeout(call.abandonTimer);
  for (const job of call.jobs) {
    let settled: Settled;
    try {
      settled = call.lost.has(job.id) ? { kind: 'lost' } : (call.failures.get(job.id) ?? decide(job));
    } catch (problem) {
      settled = { kind: 'dead', error: `deciding the outcome of this item failed: ${describeError(problem)}` };
    }
    call.resolvers.get(job.id)!(settled);
  }
}

/** The handler's answer, checked once per call: the results by id, or the error that fails the call. */
function readAnswer(call: Call, value: unknown): Map<string, unknown> | Error {
  const results = new Map<string, unknown>();
  if (value === undefined) return results;
  if (!Array.isArray(value)) return new TypeError(`the batch handler returned ${value === null ? 'null' : typeof value}; expected an array of { id, result } or nothing`);
  const ids = new Set(call.runnable.map((j) => j.id));
  for (const entry of value as unknown[]) {
    const id = typeof entry === 'object' && entry !== null ? (entry as { id?: unknown }).id : undefined;
    if (typeof id !== 'string' || !ids.has(id)) return new TypeError(`the batch handler answered for ${JSON.stringify(id) ?? String(id)}, which is not an item of this call`);
    results.set(id, (entry as { result?: unknown }).result);
  }
  return results;
}

function afterSuccess(call: Call, job: Job, answer: Map<string, unknown>): Settled {
  if (call.cancelled.has(job.id) && !answer.has(job.id)) return cancelled();
  const result = toStoredJson(answer.get(job.id), 'result', "the batch handler's result for this item");
  return 'error' in result ? dead(result.error) : done(result.value);
}

function afterFailure(call: Call, job: Job, error: unknown): Settled {
  if (call.cancelled.has(job.id)) return cancelled();
  switch (call.reason) {
    case 'deadline':
    case 'shutdown':
      return released(stopMessage(call.reason, call));
    case 'lease-lost':
      // Another item's lease was lost: this one is not at fault; back to the queue, its attempt given back.
      return released(stopMessage('lease-lost', call));
    case 'timeout':
      return failed(job, new JobStoppedError('timeout', stopMessage('timeout', call)), call.task.backoff);
    default:
      return failed(job, error, call.task.backoff);
  }
}

function afterAbandon(call: Call, job: Job, why: StopReason): Settled {
  if (call.cancelled.has(job.id)) return cancelled();
  if (why === 'lease-lost') return released(stopMessage('lease-lost', call));
  return failed(job, new JobStoppedError(why, `${stopMessage(why, call)}; the handler ignored its signal and was abandoned`), call.task.backoff);
}

function stopMessage(reason: StopReason, call: Call): string {
  switch (reason) {
    case 'timeout':
      return `the batch call timed out after ${Math.min(...call.runnable.map((j) => j.timeoutMs))} ms`;
    case 'deadline':
      return 'stopped: the invocation reached its deadline';
    case 'shutdown':
      return 'stopped: the worker shut down';
    case 'lease-lost':
      return 'stopped: the lease of an item of the batch was lost to another worker';
    case 'cancelled':
      return 'cancelled while running';
  }
}

/** The registry's batch tasks, as the claim and the wake state read them (empty: the statements are the plain ones). */
export function batchRows(registry: TaskRegistry): BatchRow[] {
  const rows: BatchRow[] = [];
  for (const task of registry.values()) {
    const batch = batchOf(task);
    if (batch) rows.push({ task: task.name, max_size: batch.maxSize, max_wait_ms: batch.maxWaitMs });
  }
  return rows;
}

/**
 * Clears the batch key of due jobs of this deployment's tasks that are not batch tasks here (the
 * option was removed; a deployment that had it enqueued them): the plain claim leaves jobs with a
 * batch key alone, and no batch claim would take these. Sent when a claim's probe saw some
 * (completeAndClaim's stranded_due). Resolves to how many it cleared (ADOPT_BATCH_LIMIT: maybe more).
 */
export async function adoptStrandedBatchJobs(sql: Sql, tasks: readonly string[]): Promise<number> {
  if (tasks.length === 0) return 0;
  return (await sql.query(adoptStranded({ tasks }))).length;
}

export { ADOPT_BATCH_LIMIT };
