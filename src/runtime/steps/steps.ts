/**
 * Durable steps at run time: ctx.step, ctx.sleep, ctx.sleepUntil and ctx.invoke for one run of a
 * job (docs/steps.md). The job's recorded steps are read by the tick with its claim; a recorded
 * step returns its stored outcome, a new one runs and is written by one fenced statement
 * (src/store/steps.ts) before its promise resolves.
 *
 * A run that must leave the invocation — a sleep, an invoke, a yield near the deadline — ends
 * with a suspension outcome at once; the handler's pending promise never settles (nothing after
 * it runs in this invocation), as with Inngest's step tooling.
 */
import { ChildJobError, isPermanent, PermanentError, SkiplockError, describeError, permanentTypeError } from '../../core/errors.ts';
import { unstorableText } from '../../core/json.ts';
import type { Outcome } from '../../core/state.ts';
import type { Job, StepKind } from '../../core/types.ts';
import type { Clock } from '../../store/clock.ts';
import { mapJobStep, toDate } from '../../store/rows.ts';
import type { Row, Sql } from '../../store/sql.ts';
import { invokeChildren, readStepsForRun, writeSleep, writeStep, type InvokeRow, type MarkerRow, type StepFence } from '../../store/steps.ts';
import { prepareEnqueue, refuseUnfittableTimeouts } from '../tasks/enqueue.ts';
import { createHistoryCursor, markerId } from './history.ts';
import type { CallbackSigner } from '../events/callback-token.ts';
import { createEventWaits, type EventWaits } from '../events/waits.ts';
import { toStoredJson, utf8Length } from '../tick/stored-json.ts';
import type { StepContext, TaskRegistry } from '../tasks/task.ts';
import { STEP_LIMITS, type StoredStep } from './types.ts';

export { STEP_LIMITS, type StoredStep } from './types.ts';

/** Reads the steps of the claimed jobs that have some (one statement; none when no job has steps). */
export async function loadSteps(sql: Sql, now: Clock, jobs: readonly Job[]): Promise<Map<string, StoredStep[]>> {
  const byJob = new Map<string, StoredStep[]>();
  const ids = jobs.filter((j) => j.stepCount > 0).map((j) => j.id);
  if (ids.length === 0) return byJob;
  for (const row of await sql.query(readStepsForRun({ now, jobIds: ids }))) {
    const list = byJob.get(String(row.job_id)) ?? [];
    list.push(toStoredStep(row));
    byJob.set(String(row.job_id), list);
  }
  return byJob;
}

function toStoredStep(row: Row): StoredStep {
  return { ...mapJobStep(row), childStatus: (row.child_status ?? null) as StoredStep['childStatus'] };
}

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
}

export interface StepRuntime extends EventWaits {
  step<T>(id: string, fn: (step: StepContext) => T | Promise<T>): Promise<Awaited<T>>;
  sleep(id: string, ms: number): Promise<void>;
  sleepUntil(id: string, date: Date | string | number): Promise<void>;
  invoke<R = unknown>(id: string, task: string, payload?: unknown): Promise<R>;
  /** ctx.patched (docs/steps.md, "Changing a workflow's code"): its marker rides on the next step write. */
  patched(id: string): boolean;
  /** A mistake the handler cannot fix by catching it (a duplicate id, a change of step order): the run ends DEAD with it. */
  fatal(): Error | undefined;
}

/** A promise that never settles: the run has ended, nothing after the await runs. */
const never = <T>(): Promise<T> => new Promise<T>(() => {});

/** The run already stopped for another reason (a deadline, a cancel): that reason, thrown. */
function stoppedError(signal: AbortSignal): unknown {
  return signal.reason ?? new Error('the run was stopped');
}

interface PendingInvoke {
  row: InvokeRow;
  reject(error: unknown): void;
}

export function createStepRuntime(deps: StepRuntimeDeps, stored: readonly StoredStep[]): StepRuntime {
  const { job } = deps;
  const history = createHistoryCursor(stored);
  const used = new Set<string>();
  /** Markers of ctx.patched not written yet: the next step write (of any kind) carries them. */
  let markers: MarkerRow[] = [];
  let stepCount = stored.length;
  let outputBytes = stored.reduce((sum, s) => sum + storedBytes(s), 0);
  /** The longest step seen for this job (recorded durations, then this run's): the yield margin. */
  let longestMs = stored.reduce((max, s) => (s.kind === 'step' && s.durationMs !== null ? Math.max(max, s.durationMs) : max), 0);
  let ranOne = false;
  let fatal: Error | undefined;
  let invokes: PendingInvoke[] = [];

  const fence = (): StepFence => ({
    now: deps.now(), jobId: job.id, lockedBy: job.lockedBy ?? '', attempt: job.attempts, leaseMs: deps.leaseMs, leaseGraceMs: deps.leaseGraceMs,
    markers: takeMarkers(),
  });
  /** The pending markers, handed to the statement about to be sent (a lost write loses the run, so they are not kept). */
  const takeMarkers = () => {
    const taken = markers;
    markers = [];
    return taken;
  };

  /** Ends the run with a suspension; the caller's promise never settles. */
  const leave = <T>(outcome: Outcome): Promise<T> => {
    if (!deps.suspend(outcome)) return Promise.reject(stoppedError(deps.signal));
    return never<T>();
  };

  /** `transient`: a history a newer version wrote (src/runtime/steps/history.ts): retried, not DEAD at once. */
  const die = (message: string, transient = false): never => {
    fatal ??= transient ? new Error(message) : new PermanentError(message);
    throw fatal;
  };

  /** Checks an id and the determinism rule, and takes the step's place (seq) in the order. Messages number steps by seq (from 0), as the API and dashboard do. */
  function reach(id: unknown, kind: Exclude<StepKind, 'patch'>): { seq: number; row: StoredStep | undefined } {
    if (typeof id !== 'string' || id.length < 1 || id.length > STEP_LIMITS.maxIdLength)
      throw permanentTypeError(`ctx.${kind}: the step id must be a string of 1 to ${STEP_LIMITS.maxIdLength} characters, got ${describeId(id)}`);
    const problem = unstorableText(id);
    if (problem) throw permanentTypeError(`ctx.${kind}: the step id ${problem}`);
    if (used.has(id)) die(`duplicate step id ${JSON.stringify(id)}: each ctx.step, ctx.sleep and ctx.invoke of a job needs its own id`);
    used.add(id);
    const reached = history.reach(id, kind);
    if (!reached.ok) return die(reached.message, reached.transient);
    if (!reached.row) {
      if (stepCount >= STEP_LIMITS.maxSteps) die(`too many steps: a job may record at most ${STEP_LIMITS.maxSteps} (ctx.step, ctx.sleep, ctx.invoke)`);
      stepCount += 1;
    }
    return { seq: reached.seq, row: reached.row };
  }

  function patched(id: unknown): boolean {
    if (typeof id !== 'string' || id.length < 1 || id.length > STEP_LIMITS.maxIdLength - 'patched:'.length)
      throw permanentTypeError(`ctx.patched: the patch id must be a string of 1 to ${STEP_LIMITS.maxIdLength - 'patched:'.length} characters, got ${describeId(id)}`);
    const problem = unstorableText(id);
    if (problem) throw permanentTypeError(`ctx.patched: the patch id ${problem}`);
    const answer = history.patched(id);
    if (answer.marker) {
      if (stepCount >= STEP_LIMITS.maxSteps) die(`too many steps: a job may record at most ${STEP_LIMITS.maxSteps} (ctx.step, ctx.sleep, ctx.invoke, ctx.patched)`);
      stepCount += 1;
      used.add(markerId(id));
      markers.push(answer.marker);
    }
    return answer.value;
  }

  /** Before a new step's fn: leave the invocation if what is left may not fit it (the first new step of a run always runs). */
  function mustYield(): boolean {
    if (!ranOne) return false;
    const margin = Math.max(STEP_LIMITS.minYieldMarginMs, longestMs);
    return deps.remainingMs() < margin || job.timeoutMs - deps.elapsedMs() < margin;
  }

  async function runStep<T>(id: string, fn: (step: StepContext) => T | Promise<T>): Promise<Awaited<T>> {
    const { seq, row } = reach(id, 'step');
    if (typeof fn !== 'function') throw permanentTypeError(`ctx.step(${JSON.stringify(id)}): the second argument must be a function`);
    if (row?.status === 'done') return row.output as Awaited<T>;
    if (mustYield()) return leave<Awaited<T>>({ kind: 'suspend', runAt: null });
    ranOne = true;
    const started = performance.now();
    let value: unknown;
    try {
      value = await fn({ idempotencyKey: `skiplock:${job.id}:${id}`, signal: deps.signal });
    } catch (error) {
      // Stopped by the worker (deadline, timeout, lease, cancel): the run's outcome says so, not the step.
      if (!deps.signal.aborted && !deps.ended()) await write(id, seq, row === undefined, { status: 'failed', output: null, error: describeError(error) }, started);
      throw error;
    }
    if (deps.ended()) return never<Awaited<T>>();
    const stored = toStoredJson(value, id, `the output of step ${JSON.stringify(id)}`, STEP_LIMITS.maxOutputBytes);
    if ('error' in stored) {
      const error = new PermanentError(stored.error.message);
      await write(id, seq, row === undefined, { status: 'failed', output: null, error: error.message }, started);
      throw error;
    }
    if (outputBytes + stored.bytes > STEP_LIMITS.maxJobOutputBytes) {
      const error = new PermanentError(`the outputs of this job's steps would exceed ${STEP_LIMITS.maxJobOutputBytes} bytes of JSON with step ${JSON.stringify(id)} (store large data elsewhere and return a reference)`);
      await write(id, seq, row === undefined, { status: 'failed', output: null, error: error.message }, started);
      throw error;
    }
    if (!(await write(id, seq, row === undefined, { status: 'done', output: JSON.stringify(stored.value), error: null }, started))) return never<Awaited<T>>();
    outputBytes += stored.bytes;
    longestMs = Math.max(longestMs, performance.now() - started);
    return stored.value as Awaited<T>;
  }

  /**
   * An event or callback a wait (at `seq`) hands the handler: counted toward the job's outputs, as
   * a step's output is; past the total, a PermanentError (uncaught, the job ends DEAD). Its data is
   * stored already (the send or the POST wrote it): a recorded one is counted in `outputBytes`
   * since the claim, so it is checked with the recorded outputs up to it, the same sum as when
   * it was first taken.
   */
  function received(what: string, seq: number, output: unknown, recorded: boolean): void {
    if (output === null || output === undefined) return;
    let total: number;
    if (recorded) total = stored.reduce((sum, s) => sum + (s.seq <= seq ? storedBytes(s) : 0), 0);
    else {
      outputBytes += jsonLength(output);
      total = outputBytes;
    }
    if (total > STEP_LIMITS.maxJobOutputBytes)
      throw new PermanentError(`the outputs of this job's steps, events and callbacks would exceed ${STEP_LIMITS.maxJobOutputBytes} bytes of JSON with ${what} (send a reference to large data instead)`);
  }

  /** The fenced step write; false (and the run stopped) when the lease was lost. */
  async function write(id: string, seq: number, isNew: boolean, outcome: { status: 'done' | 'failed'; output: string | null; error: string | null }, started: number): Promise<boolean> {
    const [row] = await deps.sql.query(writeStep({ ...fence(), id, seq, isNew, ...outcome, durationMs: performance.now() - started }));
    if (Number(row?.held ?? 0) === 1) return true;
    deps.leaseLost();
    return false;
  }

  async function sleepStep(id: string, ms: number, until: Date | null): Promise<void> {
    const { seq, row } = reach(id, 'sleep');
    if (row) {
      if (row.status === 'done') return;
      // Woken before its time (a person's "run now"): back to sleep until then.
      return leave({ kind: 'suspend', runAt: row.wakeAt!.toISOString() });
    }
    const [written] = await deps.sql.query(writeSleep({ ...fence(), id, seq, until: until?.toISOString() ?? null, ms }));
    if (!written) {
      deps.leaseLost();
      return never();
    }
    if (written.status === 'done') return;
    return leave({ kind: 'suspend', runAt: toDate(written.wake_at).toISOString() });
  }

  /** The invokes reached in one turn (Promise.all), written together once the turn is over. */
  async function flushInvokes() {
    const batch = invokes;
    invokes = [];
    if (batch.length === 0 || deps.ended()) return;
    if (deps.signal.aborted) {
      for (const b of batch) b.reject(stoppedError(deps.signal));
      return;
    }
    try {
      const rows = await deps.sql.query(invokeChildren({ ...fence(), children: batch.map((b) => b.row) }));
      if (rows.length === 0) {
        // Lost the lease, or asked to stop (cancel): the heartbeat says which, and stops the run.
        if (await deps.heartbeat()) for (const b of batch) b.reject(stoppedError(deps.signal));
        return;
      }
      if (!deps.suspend({ kind: 'wait' })) for (const b of batch) b.reject(stoppedError(deps.signal));
    } catch (error) {
      for (const b of batch) b.reject(error);
    }
  }

  async function invokeStep<R>(id: string, taskName: string, payload: unknown): Promise<R> {
    const { seq, row } = reach(id, 'invoke');
    if (row) {
      if (row.status === 'done') return row.output as R;
      if (row.status === 'failed') {
        throw new ChildJobError({ stepId: id, childId: row.childId ?? '?', childTask: row.childTask ?? taskName, childStatus: row.childStatus === 'DEAD' ? 'DEAD' : 'CANCELLED', childError: row.error });
      }
      // Still waiting (its run was woken early): wait again.
      return leave({ kind: 'wait' });
    }
    let prepared: ReturnType<typeof prepareEnqueue>;
    try {
      prepared = prepareEnqueue(deps.registry, [{ task: taskName, payload: payload ?? {} }], null, { traceparent: job.traceparent ?? undefined });
    } catch (error) {
      // The same payload fails the same way on every run: no retry can help.
      if (error instanceof SkiplockError && error.code === 'invalid_payload' && !isPermanent(error)) Object.assign(error, { permanent: true });
      throw error;
    }
    // A child no tick here could claim would leave this job WAITING forever: refused as an HTTP enqueue of it is.
    const unfittable = unfittableTimeout(deps.registry, { task: taskName }, deps.maxJobTimeoutMs);
    if (unfittable) throw new PermanentError(`ctx.invoke(${JSON.stringify(id)}): ${unfittable.message}`, { cause: unfittable });
    const { debounce: _, ...jobRow } = prepared!.rows[0]! as NonNullable<typeof prepared>['rows'][number] & { debounce?: unknown };
    return new Promise<R>((_resolve, reject) => {
      if (invokes.length === 0) setTimeout(() => void flushInvokes(), 0);
      invokes.push({ row: { step: id, seq, job: jobRow }, reject });
    });
  }

  return {
    step: runStep,
    async sleep(id, ms) {
      if (typeof ms !== 'number' || !Number.isFinite(ms) || ms < 0 || ms > STEP_LIMITS.maxSleepMs)
        throw permanentTypeError(`ctx.sleep(${JSON.stringify(id)}): ms must be a finite number from 0 to ${STEP_LIMITS.maxSleepMs} (365 days), got ${String(ms)}`);
      return sleepStep(id, ms, null);
    },
    async sleepUntil(id, date) {
      const at = date instanceof Date ? new Date(date.getTime()) : typeof date === 'string' || typeof date === 'number' ? new Date(date) : new Date(NaN);
      if (!Number.isFinite(at.getTime()) || at.getFullYear() < 1 || at.getFullYear() > 9999)
        throw permanentTypeError(`ctx.sleepUntil(${JSON.stringify(id)}): not a valid date: ${String(date)}`);
      // The database's now, as of this run's claim (job.startedAt) plus the time since: no JS clock.
      const now = (job.startedAt?.getTime() ?? at.getTime()) + deps.elapsedMs();
      if (at.getTime() - now > STEP_LIMITS.maxSleepMs) throw permanentTypeError(`ctx.sleepUntil(${JSON.stringify(id)}): ${at.toISOString()} is more than 365 days away`);
      return sleepStep(id, 0, at);
    },
    invoke: invokeStep,
    patched,
    // Events and callbacks (src/runtime/events/waits.ts).
    ...createEventWaits({
      sql: deps.sql, jobId: job.id, now: deps.now, reach, recorded: (id) => stored.find((s) => s.id === id), fence, leave, received, callbacks: deps.callbacks,
      lost: <T>() => {
        deps.leaseLost();
        return never<T>();
      },
    }),
    fatal: () => fatal,
  };
}

/** The bytes a recorded step counts toward the job's outputs: a step's, an event's or a callback's. */
function storedBytes(s: StoredStep): number {
  return (s.kind === 'step' || s.kind === 'event' || s.kind === 'callback') && s.status === 'done' && s.output !== null && s.output !== undefined ? jsonLength(s.output) : 0;
}

function jsonLength(value: unknown): number {
  try {
    return utf8Length(JSON.stringify(value) ?? '');
  } catch {
    return 0;
  }
}

function describeId(id: unknown): string {
  return typeof id === 'string' ? `${id.length} characters` : typeof id;
}

/** The refusal of an HTTP enqueue of this child (refuseUnfittableTimeouts), or undefined when it fits. */
function unfittableTimeout(registry: TaskRegistry, input: { task: string }, maxTimeoutMs: number): SkiplockError | undefined {
  try {
    refuseUnfittableTimeouts(registry, [input], maxTimeoutMs);
    return undefined;
  } catch (error) {
    if (error instanceof SkiplockError) return error;
    throw error;
  }
}
