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
import { createStepRuntime, type StepRuntime } from '../steps/steps.ts';
import { createRunStreams, type RunStreams } from '../streams/writer.ts';
import type { StoredStep } from '../steps/types.ts';
import { createProgressSlot, type ProgressSlot } from './progress.ts';
import { toStoredJson } from '../../core/stored-json.ts';
import type { Task, TaskContext, TaskRegistry } from '../tasks/task.ts';

/** Why a handler's signal was aborted. */
export type StopReason = 'timeout' | 'deadline' | 'shutdown' | 'lease-lost' | 'cancelled';

/** How a run ended: an outcome to write, or `lost` (another worker owns the job; write nothing). */
export type Settled = Outcome | { kind: 'lost' };

export { MAX_RESULT_BYTES } from '../../core/stored-json.ts';

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
  /** A batch call's heartbeat: one statement for its items; whether each is still held. */
  heartbeatJobs?(jobs: readonly Job[]): Promise<boolean[]>;
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
  /** Counts the chunks a run's stream flushes stored (ctx.stream), for /metrics. */
  streamChunksWritten?: ((count: number) => void) | undefined;
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
  const run = openRun(job, deps);
  const stop = (why: StopReason) => stopRun(run, why);
  run.timeoutTimer = setTimeout(() => stop('timeout'), job.timeoutMs);
  if (run.task) run.durable = openSteps(run, steps);
  startHandler(run);
  return { job, settled: run.settled, stop, progress: run.progress };
}

/** One run's state, shared by its phases below (what runJob's closures held). */
interface Run {
  readonly job: Job;
  readonly deps: RunDeps;
  readonly controller: AbortController;
  readonly startedAt: number;
  readonly progress: ProgressSlot;
  readonly settled: Promise<Settled>;
  /** Resolves `settled`: called once, by finish(). */
  readonly resolve: (settled: Settled) => void;
  /** Whether the outcome is decided (finish() ran): a durable step's write after it is refused. */
  ended: boolean;
  /** Why the handler's signal was aborted; the first reason wins. */
  reason: StopReason | undefined;
  timeoutTimer: ReturnType<typeof setTimeout> | undefined;
  abandonTimer: ReturnType<typeof setTimeout> | undefined;
  readonly task: Task | undefined;
  readonly backoff: Task['backoff'];
  /** The schedule state set by the handler (setState), written with a DONE result. */
  nextState: { value: unknown } | undefined;
  /** The run's durable steps (openSteps); undefined for a task not registered here. */
  durable: StepRuntime | undefined;
  /** The run's streams (ctx.stream): flushed at step boundaries and before the outcome is decided. */
  readonly streams: RunStreams;
}

/** A run's state before its handler starts: its signal, the promise it settles, its task (undefined: not registered here). */
function openRun(job: Job, deps: RunDeps): Run {
  const controller = new AbortController();
  const startedAt = performance.now();
  const progress = createProgressSlot();
  let resolve!: (settled: Settled) => void;
  const settled = new Promise<Settled>((r) => {
    resolve = r;
  });
  const task = deps.registry.get(job.task);
  const run: Run = {
    job, deps, controller, startedAt, progress, settled, resolve,
    ended: false, reason: undefined, timeoutTimer: undefined, abandonTimer: undefined,
    task, backoff: task?.backoff, nextState: undefined, durable: undefined,
    streams: createRunStreams({ sql: deps.sql, now: deps.now, job, leaseLost: () => stopRun(run, 'lease-lost'), written: deps.streamChunksWritten }),
  };
  return run;
}

/** Settles the run, once: its timers cleared, `ended` set. */
function finish(run: Run, value: Settled): void {
  if (run.ended) return;
  run.ended = true;
  run.streams.dispose();
  clearTimeout(run.timeoutTimer);
  clearTimeout(run.abandonTimer);
  run.resolve(value);
}

/** Aborts the handler's signal (the first reason wins); a handler still running abandonAfterMs later is abandoned. */
function stopRun(run: Run, why: StopReason): void {
  if (run.reason) return;
  run.reason = why;
  run.controller.abort(new JobStoppedError(why, stopMessage(why, run.job)));
  run.abandonTimer = setTimeout(() => finish(run, decide(run, afterAbandon, why)), run.deps.abandonAfterMs);
}

/** ctx.heartbeat (and a durable step's): false, and the run stopped, when the lease is lost. */
async function heartbeat(run: Run): Promise<boolean> {
  const held = await run.deps.heartbeat(run.job);
  if (!held) stopRun(run, 'lease-lost');
  return held;
}

/**
 * Ends the run now with a suspension (a sleep, an invoke, a yield between steps): the handler's
 * pending step promise never settles, and its signal is aborted for anything still running.
 */
function suspend(run: Run, outcome: Outcome): boolean {
  if (run.ended || run.reason) return false;
  finish(run, outcome);
  run.controller.abort(new JobStoppedError('deadline', 'the job left the invocation (a durable step suspended it)'));
  return true;
}

/** The run's durable steps (src/runtime/steps/steps.ts): written through deps.sql, fenced by the run's lease. */
function openSteps(run: Run, steps: readonly StoredStep[]): StepRuntime {
  const { deps, job } = run;
  return createStepRuntime(
    {
      sql: deps.sql,
      now: deps.now,
      registry: deps.registry,
      job,
      signal: run.controller.signal,
      leaseMs: deps.leaseMs,
      leaseGraceMs: deps.leaseGraceMs,
      remainingMs: deps.remainingMs,
      maxJobTimeoutMs: deps.maxJobTimeoutMs,
      elapsedMs: () => performance.now() - run.startedAt,
      suspend: (outcome) => suspend(run, outcome),
      flushStreams: () => run.streams.flush(),
      leaseLost: () => stopRun(run, 'lease-lost'),
      heartbeat: () => heartbeat(run),
      ended: () => run.ended,
      callbacks: deps.callbacks,
    },
    steps,
  );
}

/** Starts the handler on its parsed payload; an unknown task or an invalid payload is DEAD at once. */
function startHandler(run: Run): void {
  const { job, task } = run;
  if (!task) {
    finish(run, dead(new Error(`unknown task ${JSON.stringify(job.task)}: no handler is registered for it`)));
    return;
  }
  const payload = task.payload.safeParse(job.payload);
  if (!payload.success) {
    finish(run, dead(new Error(`invalid payload: ${payload.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ')}`)));
    return;
  }
  const ctx = taskContext(run);
  Promise.resolve()
    .then(() => task.handler(payload.data, ctx))
    .then(
      // The chunks the run wrote are stored before its outcome is decided (and written: DONE).
      (value) => flushAtEnd(run).then(() => finish(run, decide(run, afterSuccess, value)), (error: unknown) => finish(run, decide(run, afterFailure, error))),
      (error: unknown) => flushAtEnd(run).catch(() => {}).then(() => finish(run, decide(run, afterFailure, error))),
    );
}

/** The end of a run: its buffered stream chunks flushed (a lost lease stops the run: its outcome is `lost`). */
async function flushAtEnd(run: Run): Promise<void> {
  if (!run.ended) await run.streams.flush();
}

/** A step kind's call: a step boundary when it is called and when it returns (src/runtime/streams/writer.ts, the chunks' places). */
function bounded<T>(run: Run, call: () => Promise<T>): Promise<T> {
  run.streams.boundary();
  const after = () => run.streams.boundary();
  return call().then(
    (value) => (after(), value),
    (error: unknown) => {
      after();
      throw error;
    },
  );
}

/** The handler's `ctx`. */
function taskContext(run: Run): TaskContext {
  const { job, deps } = run;
  return {
    signal: run.controller.signal,
    job,
    attempt: job.attempts,
    idempotencyKey: `skiplock:${job.id}`,
    heartbeat: () => heartbeat(run),
    enqueue: deps.enqueue,
    progress: (value) => run.progress.set(value),
    state: job.scheduleName === null ? undefined : (job.scheduleState ?? null),
    setState: (value) => {
      if (job.scheduleName === null) throw new TypeError('setState: this job was not fired by a schedule');
      run.nextState = { value };
    },
    // Durable steps (src/runtime/steps/steps.ts), each a step boundary for the streams.
    step: (id, fn) => bounded(run, () => run.durable!.step(id, fn)),
    sleep: (id, ms) => bounded(run, () => run.durable!.sleep(id, ms)),
    sleepUntil: (id, date) => bounded(run, () => run.durable!.sleepUntil(id, date)),
    invoke: (id, task, ...payload) => bounded(run, () => run.durable!.invoke(id, task, payload[0])),
    patched: (id) => run.durable!.patched(id),
    waitForEvent: (id, options) => bounded(run, () => run.durable!.waitForEvent(id, options)) as never,
    waitForAny: (id, alternatives, options) => bounded(run, () => run.durable!.waitForAny(id, alternatives, options)) as never,
    createCallback: (id, options) => bounded(run, () => run.durable!.createCallback(id, options)),
    waitForCallback: (id) => bounded(run, () => run.durable!.waitForCallback(id)) as never,
    // Streams (src/runtime/streams/writer.ts).
    stream: (name) => run.streams.open(name),
  };
}

/**
 * Runs one of the deciders below. Whatever goes wrong in one (a task's backoff, a getter on a
 * thrown value), the job still gets an outcome: a throw here would skip `finish`, leaving the
 * job RUNNING (heartbeated for ever) and the tick unable to end.
 */
function decide<T>(run: Run, decider: (run: Run, value: T) => Settled, value: T): Settled {
  try {
    return decider(run, value);
  } catch (problem) {
    try {
      return failed(run.job, new Error(`deciding the outcome of this run failed: ${describeError(problem)}`));
    } catch {
      return { kind: 'dead', error: 'deciding the outcome of this run failed' };
    }
  }
}

function afterSuccess(run: Run, value: unknown): Settled {
  const { job, backoff, nextState } = run;
  if (run.reason === 'lease-lost') return { kind: 'lost' };
  // A mistake in the handler's steps (a duplicate id, another order) that it caught: still DEAD.
  const fatal = run.durable?.fatal();
  if (fatal) return failed(job, fatal, backoff);
  const result = toStoredJson(value, 'result', "the handler's result");
  if ('error' in result) return dead(result.error);
  if (!nextState) return done(result.value);
  const state = toStoredJson(nextState.value, 'state', 'the state given to setState');
  if ('error' in state) return dead(state.error);
  return done(result.value, { value: state.value });
}

/** Decides the outcome of a handler that threw, given why (or whether) it was stopped. */
function afterFailure(run: Run, error: unknown): Settled {
  const { job, backoff, reason } = run;
  const fatal = run.durable?.fatal();
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
function afterAbandon(run: Run, why: StopReason): Settled {
  const { job, backoff } = run;
  if (why === 'lease-lost') return { kind: 'lost' };
  if (why === 'cancelled') return cancelled();
  return failed(job, new JobStoppedError(why, `${stopMessage(why, job)}; the handler ignored its signal and was abandoned`), backoff);
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
