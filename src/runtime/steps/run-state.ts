/**
 * One run's step state, shared by the step kinds that src/runtime/steps/steps.ts composes
 * (ctx.step, ctx.sleep, ctx.invoke, ctx.patched, the event waits): the history cursor, the ids
 * reached, the counts toward the limits (steps, bytes of output, the longest step), the markers
 * ctx.patched has yet to write, and the ways a step ends the run — a suspension, a lost lease, a
 * mistake the handler cannot catch. Each kind takes this record and the functions here.
 */
import { PermanentError, permanentTypeError } from '../../core/errors.ts';
import { unstorableText } from '../../core/json.ts';
import type { Outcome } from '../../core/state.ts';
import type { Job, StepKind } from '../../core/types.ts';
import type { Clock } from '../../store/clock.ts';
import type { Sql } from '../../store/sql.ts';
import type { MarkerRow, StepFence } from '../../store/steps.ts';
import type { CallbackSigner } from '../events/callback-token.ts';
import { utf8Length } from '../../core/stored-json.ts';
import type { TaskRegistry } from '../tasks/task.ts';
import { createHistoryCursor, type HistoryCursor } from './history.ts';
import { STEP_LIMITS, type StoredStep } from './types.ts';

export interface StepRuntimeDeps {
  sql: Sql;
  now: () => Clock;
  registry: TaskRegistry;
  job: Job;
  signal: AbortSignal;
  /** The tick's lease settings: a step write extends the lease. */
  leaseMs: number;
  leaseGraceMs: number;
  /** Milliseconds left before the invocation's deadline (its margin already taken off). */
  remainingMs(): number;
  /** The longest child timeout a tick of this deployment can claim (TickOptions.maxJobTimeoutMs). */
  maxJobTimeoutMs: number;
  /** Milliseconds since this run started (its claim). */
  elapsedMs(): number;
  /** Ends the run with this outcome now (a suspension); false when the run had already ended. */
  suspend(outcome: Outcome): boolean;
  /** The lease is lost: stop the run (outcome `lost`). */
  leaseLost(): void;
  /** ctx.heartbeat: false (and the run stopped) when the lease is lost; a cancel asked stops the run too. */
  heartbeat(): Promise<boolean>;
  /** Whether the run has ended (its outcome is decided). */
  ended(): boolean;
  /** Signs callback URLs (ctx.createCallback); absent when the deployment has none configured. */
  callbacks?: CallbackSigner | undefined;
  /**
   * Flushes the run's buffered stream chunks (src/runtime/streams/writer.ts) before a step is
   * recorded, so a chunk written inside a step is stored no later than the step; false when the
   * lease was lost (the run is stopped). Absent: nothing to flush.
   */
  flushStreams?(): Promise<boolean>;
}

export interface RunState {
  readonly deps: StepRuntimeDeps;
  readonly job: Job;
  /** The steps recorded before this run (the claim's read). */
  readonly stored: readonly StoredStep[];
  readonly history: HistoryCursor;
  /** The step ids (and marker ids) this run has reached: each once. */
  readonly used: Set<string>;
  /** Markers of ctx.patched not written yet: the next step write (of any kind) carries them. */
  markers: MarkerRow[];
  /** Steps recorded for the job, this run's new ones counted (at most STEP_LIMITS.maxSteps). */
  stepCount: number;
  /** Bytes of JSON the job's outputs count so far (at most STEP_LIMITS.maxJobOutputBytes). */
  outputBytes: number;
  /** The longest step seen for this job (recorded durations, then this run's): the yield margin. */
  longestMs: number;
  /** Whether this run has run a new step's fn (the first one always runs). */
  ranOne: boolean;
  /** A mistake the handler cannot fix by catching it (a duplicate id, a change of step order). */
  fatal: Error | undefined;
}

export function createRunState(deps: StepRuntimeDeps, stored: readonly StoredStep[]): RunState {
  return {
    deps,
    job: deps.job,
    stored,
    history: createHistoryCursor(stored),
    used: new Set<string>(),
    markers: [],
    stepCount: stored.length,
    outputBytes: stored.reduce((sum, s) => sum + storedBytes(s), 0),
    longestMs: stored.reduce((max, s) => (s.kind === 'step' && s.durationMs !== null ? Math.max(max, s.durationMs) : max), 0),
    ranOne: false,
    fatal: undefined,
  };
}

/** A promise that never settles: the run has ended, nothing after the await runs. */
export const never = <T>(): Promise<T> => new Promise<T>(() => {});

/** The run already stopped for another reason (a deadline, a cancel): that reason, thrown. */
export function stoppedError(signal: AbortSignal): unknown {
  return signal.reason ?? new Error('the run was stopped');
}

/** The fence of a step write; it takes the pending markers (a lost write loses the run, so they are not kept). */
export function fence(run: RunState): StepFence {
  const { deps, job } = run;
  return {
    now: deps.now(), jobId: job.id, lockedBy: job.lockedBy ?? '', attempt: job.attempts, leaseMs: deps.leaseMs, leaseGraceMs: deps.leaseGraceMs,
    markers: takeMarkers(run),
  };
}

function takeMarkers(run: RunState): MarkerRow[] {
  const taken = run.markers;
  run.markers = [];
  return taken;
}

/** Before a step write: the run's stream chunks flushed (false: the lease was lost, the run is stopped). */
export function flushStreams(run: RunState): Promise<boolean> {
  return run.deps.flushStreams?.() ?? Promise.resolve(true);
}

/** Ends the run with a suspension; the caller's promise never settles. */
export function leave<T>(run: RunState, outcome: Outcome): Promise<T> {
  if (!run.deps.suspend(outcome)) return Promise.reject(stoppedError(run.deps.signal));
  return never<T>();
}

/** The lease was lost: the run is stopped; the promise never settles. */
export function lost<T>(run: RunState): Promise<T> {
  run.deps.leaseLost();
  return never<T>();
}

/** `transient`: a history a newer version wrote (src/runtime/steps/history.ts): retried, not DEAD at once. */
export function die(run: RunState, message: string, transient = false): never {
  run.fatal ??= transient ? new Error(message) : new PermanentError(message);
  throw run.fatal;
}

/** Counts one more step recorded for the job; past STEP_LIMITS.maxSteps the run dies. `kinds` names what counts, for the message. */
export function countStep(run: RunState, kinds: string): void {
  if (run.stepCount >= STEP_LIMITS.maxSteps) die(run, `too many steps: a job may record at most ${STEP_LIMITS.maxSteps} (${kinds})`);
  run.stepCount += 1;
}

/** Checks an id and the determinism rule, and takes the step's place (seq) in the order. Messages number steps by seq (from 0), as the API and dashboard do. */
export function reach(run: RunState, id: unknown, kind: Exclude<StepKind, 'patch'>): { seq: number; row: StoredStep | undefined } {
  if (typeof id !== 'string' || id.length < 1 || id.length > STEP_LIMITS.maxIdLength)
    throw permanentTypeError(`ctx.${kind}: the step id must be a string of 1 to ${STEP_LIMITS.maxIdLength} characters, got ${describeId(id)}`);
  const problem = unstorableText(id);
  if (problem) throw permanentTypeError(`ctx.${kind}: the step id ${problem}`);
  if (run.used.has(id)) die(run, `duplicate step id ${JSON.stringify(id)}: each ctx.step, ctx.sleep and ctx.invoke of a job needs its own id`);
  run.used.add(id);
  const reached = run.history.reach(id, kind);
  if (!reached.ok) return die(run, reached.message, reached.transient);
  if (!reached.row) countStep(run, 'ctx.step, ctx.sleep, ctx.invoke');
  return { seq: reached.seq, row: reached.row };
}

/**
 * An event or callback a wait (at `seq`) hands the handler: counted toward the job's outputs, as
 * a step's output is; past the total, a PermanentError (uncaught, the job ends DEAD). Its data is
 * stored already (the send or the POST wrote it): a recorded one is counted in `outputBytes`
 * since the claim, so it is checked with the recorded outputs up to it, the same sum as when
 * it was first taken.
 */
export function received(run: RunState, what: string, seq: number, output: unknown, recorded: boolean): void {
  if (output === null || output === undefined) return;
  let total: number;
  if (recorded) total = run.stored.reduce((sum, s) => sum + (s.seq <= seq ? storedBytes(s) : 0), 0);
  else {
    run.outputBytes += jsonLength(output);
    total = run.outputBytes;
  }
  if (total > STEP_LIMITS.maxJobOutputBytes)
    throw new PermanentError(`the outputs of this job's steps, events and callbacks would exceed ${STEP_LIMITS.maxJobOutputBytes} bytes of JSON with ${what} (send a reference to large data instead)`);
}

/** The bytes a recorded step counts toward the job's outputs: a step's, an event's or a callback's. */
function storedBytes(s: StoredStep): number {
  return (s.kind === 'step' || s.kind === 'event' || s.kind === 'any-event' || s.kind === 'callback') && s.status === 'done' && s.output !== null && s.output !== undefined ? jsonLength(s.output) : 0;
}

function jsonLength(value: unknown): number {
  try {
    return utf8Length(JSON.stringify(value) ?? '');
  } catch {
    return 0;
  }
}

export function describeId(id: unknown): string {
  return typeof id === 'string' ? `${id.length} characters` : typeof id;
}
