/**
 * Runs one claimed job's handler under its AbortSignal and turns however it ends into an
 * Outcome. A handler that ignores its signal is abandoned `abandonAfterMs` after the abort:
 * the job's outcome is decided then, and whatever the handler does later is ignored.
 */
import { describeError } from '../core/errors.ts';
import { findUnstorableJson } from '../core/json.ts';
import { cancelled, dead, done, failed, released, type Outcome } from '../core/state.ts';
import type { Job } from '../core/types.ts';
import type { EnqueueInput } from './enqueue.ts';
import { createProgressSlot, type ProgressSlot } from './progress.ts';
import type { TaskContext, TaskRegistry } from './task.ts';

/** Why a handler's signal was aborted. */
export type StopReason = 'timeout' | 'deadline' | 'shutdown' | 'lease-lost' | 'cancelled';

/** How a run ended: an outcome to write, or `lost` (another worker owns the job; write nothing). */
export type Settled = Outcome | { kind: 'lost' };

/** The largest result (or setState value) a run may store, in bytes of JSON: 1 MiB. */
export const MAX_RESULT_BYTES = 1024 * 1024;

export class JobStoppedError extends Error {
  readonly reason: StopReason;
  constructor(reason: StopReason, message: string) {
    super(message);
    this.name = 'JobStoppedError';
    this.reason = reason;
  }
}

export interface RunDeps {
  registry: TaskRegistry;
  abandonAfterMs: number;
  heartbeat(job: Job): Promise<boolean>;
  enqueue(input: EnqueueInput): Promise<Job>;
}

export interface RunningJob {
  job: Job;
  /** Resolves exactly once, at the latest `abandonAfterMs` after `stop()`. */
  settled: Promise<Settled>;
  /** Aborts the handler's signal; the first reason wins. */
  stop(reason: StopReason): void;
  /** What the handler reported with ctx.progress, to write with the next heartbeat or the result. */
  progress: ProgressSlot;
}

export function runJob(job: Job, deps: RunDeps): RunningJob {
  const controller = new AbortController();
  const progress = createProgressSlot();
  let reason: StopReason | undefined;
  let finish!: (settled: Settled) => void;
  let abandonTimer: ReturnType<typeof setTimeout> | undefined;
  const settled = new Promise<Settled>((resolve) => {
    let finished = false;
    finish = (value) => {
      if (finished) return;
      finished = true;
      clearTimeout(timeoutTimer);
      clearTimeout(abandonTimer);
      resolve(value);
    };
  });

  const stop = (why: StopReason) => {
    if (reason) return;
    reason = why;
    controller.abort(new JobStoppedError(why, stopMessage(why, job)));
    abandonTimer = setTimeout(() => finish(decide(() => afterAbandon(why))), deps.abandonAfterMs);
  };
  const timeoutTimer = setTimeout(() => stop('timeout'), job.timeoutMs);

  const task = deps.registry.get(job.task);
  const backoff = task?.backoff;
  /** The schedule state set by the handler (setState), written with a DONE result. */
  let nextState: { value: unknown } | undefined;

  /** Decides the outcome of a handler that threw, given why (or whether) it was stopped. */
  function afterFailure(error: unknown): Settled {
    switch (reason) {
      case 'lease-lost':
        return { kind: 'lost' };
      case 'cancelled':
        return cancelled();
      case 'deadline':
      case 'shutdown':
        // Stopped by us, not by its own fault: back to the queue without spending the attempt.
        return released(stopMessage(reason, job));
      case 'timeout':
        return failed(job, new JobStoppedError('timeout', stopMessage('timeout', job)), backoff);
      default:
        return failed(job, error, backoff);
    }
  }

  /** A handler still running `abandonAfterMs` after its abort: the attempt counts, so a hung job cannot loop. */
  function afterAbandon(why: StopReason): Settled {
    if (why === 'lease-lost') return { kind: 'lost' };
    if (why === 'cancelled') return cancelled();
    return failed(job, new JobStoppedError(why, `${stopMessage(why, job)}; the handler ignored its signal and was abandoned`), backoff);
  }

  /**
   * Runs one of the deciders below. Whatever goes wrong in one (a task's backoff, a getter on a
   * thrown value), the job still gets an outcome: a throw here would skip `finish`, leaving the
   * job RUNNING (heartbeated for ever) and the tick unable to end.
   */
  function decide(decider: () => Settled): Settled {
    try {
      return decider();
    } catch (problem) {
      try {
        return failed(job, new Error(`deciding the outcome of this run failed: ${describeError(problem)}`));
      } catch {
        return { kind: 'dead', error: 'deciding the outcome of this run failed' };
      }
    }
  }

  function afterSuccess(value: unknown): Settled {
    if (reason === 'lease-lost') return { kind: 'lost' };
    const result = toStoredJson(value, 'result', "the handler's result");
    if ('error' in result) return dead(result.error);
    if (!nextState) return done(result.value);
    const state = toStoredJson(nextState.value, 'state', 'the state given to setState');
    if ('error' in state) return dead(state.error);
    return done(result.value, { value: state.value });
  }

  if (!task) {
    finish(dead(new Error(`unknown task ${JSON.stringify(job.task)}: no handler is registered for it`)));
  } else {
    const payload = task.payload.safeParse(job.payload);
    if (!payload.success) {
      finish(dead(new Error(`invalid payload: ${payload.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ')}`)));
    } else {
      const ctx: TaskContext = {
        signal: controller.signal,
        job,
        attempt: job.attempts,
        idempotencyKey: `skiplock:${job.id}`,
        heartbeat: async () => {
          const held = await deps.heartbeat(job);
          if (!held) stop('lease-lost');
          return held;
        },
        enqueue: deps.enqueue,
        progress: (value) => progress.set(value),
        state: job.scheduleName === null ? undefined : (job.scheduleState ?? null),
        setState: (value) => {
          if (job.scheduleName === null) throw new TypeError('setState: this job was not fired by a schedule');
          nextState = { value };
        },
        // Durable steps (issue 15): being built.
        step: () => Promise.reject(new Error('ctx.step is not available yet')),
        sleep: () => Promise.reject(new Error('ctx.sleep is not available yet')),
        sleepUntil: () => Promise.reject(new Error('ctx.sleepUntil is not available yet')),
        invoke: () => Promise.reject(new Error('ctx.invoke is not available yet')),
      };
      Promise.resolve()
        .then(() => task.handler(payload.data, ctx))
        .then(
          (value) => finish(decide(() => afterSuccess(value))),
          (error: unknown) => finish(decide(() => afterFailure(error))),
        );
    }
  }

  return { job, settled, stop, progress };
}

function stopMessage(reason: StopReason, job: Job): string {
  switch (reason) {
    case 'timeout':
      return `timed out after ${job.timeoutMs} ms`;
    case 'deadline':
      return 'stopped: the invocation reached its deadline';
    case 'shutdown':
      return 'stopped: the worker shut down';
    case 'lease-lost':
      return 'stopped: the lease was lost to another worker';
    case 'cancelled':
      return 'cancelled while running';
  }
}

/**
 * A value as jsonb will hold it: refuse what JSON cannot carry instead of storing a lie, and what
 * jsonb refuses (NUL, lone surrogates), since one such value would fail its whole batch's write.
 */
function toStoredJson(value: unknown, root: string, what: string): { value: unknown } | { error: Error } {
  let json: unknown;
  try {
    const text: string | undefined = value === undefined ? 'null' : JSON.stringify(value);
    if (text === undefined) return { error: new Error(`${what} is not JSON-serializable: a ${typeof value}`) };
    // Too large for one statement would fail its whole batch's write: refused here, alone.
    const bytes = text.length * 3 <= MAX_RESULT_BYTES ? text.length : new TextEncoder().encode(text).length;
    if (bytes > MAX_RESULT_BYTES) return { error: new Error(`${what} is ${bytes} bytes as JSON, more than the ${MAX_RESULT_BYTES} allowed (store it elsewhere and return a reference)`) };
    json = JSON.parse(text);
  } catch (error) {
    return { error: new Error(`${what} is not JSON-serializable: ${describeError(error)}`) };
  }
  const unstorable = findUnstorableJson(json, [root]);
  return unstorable ? { error: new Error(`${what} cannot be stored: ${unstorable.message} at ${unstorable.path.join('.')}`) } : { value: json };
}
