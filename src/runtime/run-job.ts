/**
 * Runs one claimed job's handler under its AbortSignal and turns however it ends into an
 * Outcome. A handler that ignores its signal is abandoned `abandonAfterMs` after the abort:
 * the job's outcome is decided then, and whatever the handler does later is ignored.
 */
import { findUnstorableJson } from '../core/json.ts';
import { cancelled, dead, done, failed, released, type Outcome } from '../core/state.ts';
import type { Job } from '../core/types.ts';
import type { EnqueueInput } from './enqueue.ts';
import type { TaskContext, TaskRegistry } from './task.ts';

/** Why a handler's signal was aborted. */
export type StopReason = 'timeout' | 'deadline' | 'shutdown' | 'lease-lost' | 'cancelled';

/** How a run ended: an outcome to write, or `lost` (another worker owns the job; write nothing). */
export type Settled = Outcome | { kind: 'lost' };

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
}

export function runJob(job: Job, deps: RunDeps): RunningJob {
  const controller = new AbortController();
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
    abandonTimer = setTimeout(() => finish(afterAbandon(why)), deps.abandonAfterMs);
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

  function afterSuccess(value: unknown): Settled {
    if (reason === 'lease-lost') return { kind: 'lost' };
    let result: unknown;
    try {
      // The result is stored as jsonb: refuse what JSON cannot carry instead of storing a lie.
      result = value === undefined ? null : JSON.parse(JSON.stringify(value));
    } catch (error) {
      return dead(new Error(`the handler's result is not JSON-serializable: ${String(error)}`));
    }
    // jsonb refuses some JSON (NUL, lone surrogates): one such value would fail its whole batch's write.
    const unstorableResult = findUnstorableJson(result, ['result']);
    if (unstorableResult) return dead(new Error(`the handler's result cannot be stored: ${unstorableResult.message} at ${unstorableResult.path.join('.')}`));
    if (!nextState) return done(result);
    let state: unknown;
    try {
      state = nextState.value === undefined ? null : JSON.parse(JSON.stringify(nextState.value));
    } catch (error) {
      return dead(new Error(`the state given to setState is not JSON-serializable: ${String(error)}`));
    }
    const unstorable = findUnstorableJson(state, ['state']);
    if (unstorable) return dead(new Error(`the state given to setState cannot be stored: ${unstorable.message}`));
    return done(result, { value: state });
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
        state: job.scheduleName === null ? undefined : (job.scheduleState ?? null),
        setState: (value) => {
          if (job.scheduleName === null) throw new TypeError('setState: this job was not fired by a schedule');
          nextState = { value };
        },
      };
      Promise.resolve()
        .then(() => task.handler(payload.data, ctx))
        .then(
          (value) => finish(afterSuccess(value)),
          (error: unknown) => finish(afterFailure(error)),
        );
    }
  }

  return { job, settled, stop };
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
