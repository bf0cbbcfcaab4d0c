/**
 * Runs one claimed job's handler under its AbortSignal and turns however it ends into an
 * Outcome. A handler that ignores its signal is abandoned `abandonAfterMs` after the abort:
 * the job's outcome is decided then, and whatever the handler does later is ignored.
 */
import { describeError } from '../../core/errors.ts';
import { cancelled, dead, done, failed, released, type Outcome } from '../../core/state.ts';
import type { Job } from '../../core/types.ts';
import type { Clock } from '../../store/clock.ts';
import type { Sql } from '../../store/sql.ts';
import type { CallbackSigner } from '../events/callback-token.ts';
import type { EnqueueInput } from '../tasks/enqueue-input.ts';
import { createStepRuntime } from '../steps/steps.ts';
import type { StoredStep } from '../steps/types.ts';
import { createProgressSlot, type ProgressSlot } from './progress.ts';
import { toStoredJson } from './stored-json.ts';
import type { TaskContext, TaskRegistry } from '../tasks/task.ts';

/** Why a handler's signal was aborted. */
export type StopReason = 'timeout' | 'deadline' | 'shutdown' | 'lease-lost' | 'cancelled';

/** How a run ended: an outcome to write, or `lost` (another worker owns the job; write nothing). */
export type Settled = Outcome | { kind: 'lost' };

export { MAX_RESULT_BYTES } from './stored-json.ts';

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
  /** Durable steps (src/runtime/steps/steps.ts) write through these, fenced by the run's lease. */
  sql: Sql;
  now: () => Clock;
  /** The tick's lease settings: a step write extends the lease like a heartbeat. */
  leaseMs: number;
  leaseGraceMs: number;
  /** Milliseconds left before the invocation's deadline, its margin taken off: steps yield before it. */
  remainingMs(): number;
  /** TickOptions.maxJobTimeoutMs: a ctx.invoke of a longer child is refused. */
  maxJobTimeoutMs: number;
  /** Signs callback URLs (ctx.createCallback); absent without createSkiplock's `callbacks` option. */
  callbacks?: CallbackSigner | undefined;
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

/** `steps`: the job's recorded durable steps, read with its claim (none for a job without steps). */
export function runJob(job: Job, deps: RunDeps, steps: readonly StoredStep[] = []): RunningJob {
  const controller = new AbortController();
  const startedAt = performance.now();
  let ended = false;
  const progress = createProgressSlot();
  let reason: StopReason | undefined;
  let finish!: (settled: Settled) => void;
  let abandonTimer: ReturnType<typeof setTimeout> | undefined;
  const settled = new Promise<Settled>((resolve) => {
    let finished = false;
    finish = (value) => {
      if (finished) return;
      finished = ended = true;
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
    const fatal = durable?.fatal();
    // A PermanentError (DEAD at once), or a history a newer version wrote (retried: src/runtime/steps/history.ts).
    if (fatal && reason !== 'lease-lost') return failed(job, fatal, backoff);
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
    // A mistake in the handler's steps (a duplicate id, another order) that it caught: still DEAD.
    const fatal = durable?.fatal();
    if (fatal) return failed(job, fatal, backoff);
    const result = toStoredJson(value, 'result', "the handler's result");
    if ('error' in result) return dead(result.error);
    if (!nextState) return done(result.value);
    const state = toStoredJson(nextState.value, 'state', 'the state given to setState');
    if ('error' in state) return dead(state.error);
    return done(result.value, { value: state.value });
  }

  /**
   * Ends the run now with a suspension (a sleep, an invoke, a yield between steps): the handler's
   * pending step promise never settles, and its signal is aborted for anything still running.
   */
  const suspend = (outcome: Outcome): boolean => {
    if (ended || reason) return false;
    finish(outcome);
    controller.abort(new JobStoppedError('deadline', 'the job left the invocation (a durable step suspended it)'));
    return true;
  };
  const durable = task
    ? createStepRuntime(
        {
          sql: deps.sql,
          now: deps.now,
          registry: deps.registry,
          job,
          signal: controller.signal,
          leaseMs: deps.leaseMs,
          leaseGraceMs: deps.leaseGraceMs,
          remainingMs: deps.remainingMs,
          maxJobTimeoutMs: deps.maxJobTimeoutMs,
          elapsedMs: () => performance.now() - startedAt,
          suspend,
          leaseLost: () => stop('lease-lost'),
          heartbeat: async () => {
            const held = await deps.heartbeat(job);
            if (!held) stop('lease-lost');
            return held;
          },
          ended: () => ended,
          callbacks: deps.callbacks,
        },
        steps,
      )
    : undefined;

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
        // Durable steps (src/runtime/steps/steps.ts).
        step: (id, fn) => durable!.step(id, fn),
        sleep: (id, ms) => durable!.sleep(id, ms),
        sleepUntil: (id, date) => durable!.sleepUntil(id, date),
        invoke: (id, task, ...payload) => durable!.invoke(id, task, payload[0]),
        patched: (id) => durable!.patched(id),
        waitForEvent: (id, options) => durable!.waitForEvent(id, options) as never,
        createCallback: (id, options) => durable!.createCallback(id, options),
        waitForCallback: (id) => durable!.waitForCallback(id) as never,
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
