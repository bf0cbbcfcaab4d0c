/**
 * Durable steps at run time: the ctx of one run of a job (docs/steps.md) — ctx.step, ctx.sleep,
 * ctx.sleepUntil and ctx.patched here, ctx.invoke in ./invoke.ts, the event waits in
 * src/runtime/steps/event-waits.ts, the state they share in ./run-state.ts. The job's recorded steps
 * are read by the tick with its claim (loadSteps); a recorded step returns its stored outcome, a
 * new one runs and is written by one fenced statement (src/store/steps.ts) before its promise
 * resolves.
 *
 * A run that must leave the invocation — a sleep, an invoke, a yield near the deadline — ends
 * with a suspension outcome at once; the handler's pending promise never settles (nothing after
 * it runs in this invocation), as with Inngest's step tooling.
 */
import { PermanentError, describeError, permanentTypeError } from '../../core/errors.ts';
import { unstorableText } from '../../core/json.ts';
import type { Outcome } from '../../core/state.ts';
import type { Job } from '../../core/types.ts';
import type { Clock } from '../../store/clock.ts';
import { mapJobStep, toDate } from '../../store/rows.ts';
import type { Row, Sql } from '../../store/sql.ts';
import { readStepsForRun, writeSleep, writeStep } from '../../store/steps.ts';
import { markerId } from './history.ts';
import { createEventWaits, type EventWaits, type WaitHelpers } from './event-waits.ts';
import { toStoredJson } from '../../core/stored-json.ts';
import type { StepContext } from '../tasks/task.ts';
import { createInvoke } from './invoke.ts';
import { countStep, createRunState, describeId, fence, flushStreams, leave, lost, never, reach, received, type RunState, type StepRuntimeDeps } from './run-state.ts';
import { STEP_LIMITS, type StoredStep } from './types.ts';

export { STEP_LIMITS, type StoredStep } from './types.ts';
export type { StepRuntimeDeps } from './run-state.ts';

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

/**
 * The ctx of one run's durable steps: each step kind built by its own function over the run's
 * shared state (src/runtime/steps/run-state.ts).
 */
export function createStepRuntime(deps: StepRuntimeDeps, stored: readonly StoredStep[]): StepRuntime {
  const run = createRunState(deps, stored);
  return {
    step: (id, fn) => runStep(run, id, fn),
    sleep: (id, ms) => sleep(run, id, ms),
    sleepUntil: (id, date) => sleepUntil(run, id, date),
    invoke: createInvoke(run),
    patched: (id) => patched(run, id),
    // Events and callbacks (src/runtime/steps/event-waits.ts).
    ...createEventWaits(waitHelpers(run)),
    fatal: () => run.fatal,
  };
}

/** ctx.step: a recorded step returns its output; a new one runs its fn and is written before its promise resolves. */
async function runStep<T>(run: RunState, id: string, fn: (step: StepContext) => T | Promise<T>): Promise<Awaited<T>> {
  const { deps, job } = run;
  const { seq, row } = reach(run, id, 'step');
  if (typeof fn !== 'function') throw permanentTypeError(`ctx.step(${JSON.stringify(id)}): the second argument must be a function`);
  if (row?.status === 'done') return row.output as Awaited<T>;
  if (mustYield(run)) return (await flushStreams(run)) ? leave<Awaited<T>>(run, { kind: 'suspend', runAt: null }) : never<Awaited<T>>();
  run.ranOne = true;
  const started = performance.now();
  const isNew = row === undefined;
  let value: unknown;
  try {
    value = await fn({ idempotencyKey: `skiplock:${job.id}:${id}`, signal: deps.signal });
  } catch (error) {
    // Stopped by the worker (deadline, timeout, lease, cancel): the run's outcome says so, not the step.
    if (!deps.signal.aborted && !deps.ended()) await write(run, id, seq, isNew, { status: 'failed', output: null, error: describeError(error) }, started);
    throw error;
  }
  if (deps.ended()) return never<Awaited<T>>();
  const stored = toStoredJson(value, id, `the output of step ${JSON.stringify(id)}`, STEP_LIMITS.maxOutputBytes);
  if ('error' in stored) {
    const error = new PermanentError(stored.error.message);
    await write(run, id, seq, isNew, { status: 'failed', output: null, error: error.message }, started);
    throw error;
  }
  if (run.outputBytes + stored.bytes > STEP_LIMITS.maxJobOutputBytes) {
    const error = new PermanentError(`the outputs of this job's steps would exceed ${STEP_LIMITS.maxJobOutputBytes} bytes of JSON with step ${JSON.stringify(id)} (store large data elsewhere and return a reference)`);
    await write(run, id, seq, isNew, { status: 'failed', output: null, error: error.message }, started);
    throw error;
  }
  if (!(await write(run, id, seq, isNew, { status: 'done', output: JSON.stringify(stored.value), error: null }, started))) return never<Awaited<T>>();
  run.outputBytes += stored.bytes;
  run.longestMs = Math.max(run.longestMs, performance.now() - started);
  return stored.value as Awaited<T>;
}

/** Before a new step's fn: leave the invocation if what is left may not fit it (the first new step of a run always runs). */
function mustYield(run: RunState): boolean {
  if (!run.ranOne) return false;
  const margin = Math.max(STEP_LIMITS.minYieldMarginMs, run.longestMs);
  return run.deps.remainingMs() < margin || run.job.timeoutMs - run.deps.elapsedMs() < margin;
}

/** The fenced step write; false (and the run stopped) when the lease was lost. */
async function write(run: RunState, id: string, seq: number, isNew: boolean, outcome: { status: 'done' | 'failed'; output: string | null; error: string | null }, started: number): Promise<boolean> {
  if (!(await flushStreams(run))) return false;
  const [row] = await run.deps.sql.query(writeStep({ ...fence(run), id, seq, isNew, ...outcome, durationMs: performance.now() - started }));
  if (Number(row?.held ?? 0) === 1) return true;
  run.deps.leaseLost();
  return false;
}

/** ctx.sleep. */
async function sleep(run: RunState, id: string, ms: number): Promise<void> {
  if (typeof ms !== 'number' || !Number.isFinite(ms) || ms < 0 || ms > STEP_LIMITS.maxSleepMs)
    throw permanentTypeError(`ctx.sleep(${JSON.stringify(id)}): ms must be a finite number from 0 to ${STEP_LIMITS.maxSleepMs} (365 days), got ${String(ms)}`);
  return sleepStep(run, id, ms, null);
}

/** ctx.sleepUntil. */
async function sleepUntil(run: RunState, id: string, date: Date | string | number): Promise<void> {
  const at = date instanceof Date ? new Date(date.getTime()) : typeof date === 'string' || typeof date === 'number' ? new Date(date) : new Date(NaN);
  if (!Number.isFinite(at.getTime()) || at.getFullYear() < 1 || at.getFullYear() > 9999)
    throw permanentTypeError(`ctx.sleepUntil(${JSON.stringify(id)}): not a valid date: ${String(date)}`);
  // The database's now, as of this run's claim (job.startedAt) plus the time since: no JS clock.
  const now = (run.job.startedAt?.getTime() ?? at.getTime()) + run.deps.elapsedMs();
  if (at.getTime() - now > STEP_LIMITS.maxSleepMs) throw permanentTypeError(`ctx.sleepUntil(${JSON.stringify(id)}): ${at.toISOString()} is more than 365 days away`);
  return sleepStep(run, id, 0, at);
}

/** A sleep (for `ms`, or until `until`): recorded and suspended, or over already. */
async function sleepStep(run: RunState, id: string, ms: number, until: Date | null): Promise<void> {
  const { seq, row } = reach(run, id, 'sleep');
  if (row) {
    if (row.status === 'done') return;
    // Woken before its time (a person's "run now"): back to sleep until then.
    return leave(run, { kind: 'suspend', runAt: row.wakeAt!.toISOString() });
  }
  if (!(await flushStreams(run))) return lost(run);
  const [written] = await run.deps.sql.query(writeSleep({ ...fence(run), id, seq, until: until?.toISOString() ?? null, ms }));
  if (!written) return lost(run);
  if (written.status === 'done') return;
  return leave(run, { kind: 'suspend', runAt: toDate(written.wake_at).toISOString() });
}

/** ctx.patched (docs/steps.md, "Changing a workflow's code"): the answer; a new marker rides on the next step write. */
function patched(run: RunState, id: unknown): boolean {
  if (typeof id !== 'string' || id.length < 1 || id.length > STEP_LIMITS.maxIdLength - 'patched:'.length)
    throw permanentTypeError(`ctx.patched: the patch id must be a string of 1 to ${STEP_LIMITS.maxIdLength - 'patched:'.length} characters, got ${describeId(id)}`);
  const problem = unstorableText(id);
  if (problem) throw permanentTypeError(`ctx.patched: the patch id ${problem}`);
  const answer = run.history.patched(id);
  if (answer.marker) {
    countStep(run, 'ctx.step, ctx.sleep, ctx.invoke, ctx.patched');
    run.used.add(markerId(id));
    run.markers.push(answer.marker);
  }
  return answer.value;
}

/** What the event waits (src/runtime/steps/event-waits.ts) take of the run. */
function waitHelpers(run: RunState): WaitHelpers {
  const { deps } = run;
  return {
    sql: deps.sql,
    jobId: run.job.id,
    now: deps.now,
    reach: (id, kind) => reach(run, id, kind),
    recorded: (id) => run.stored.find((s) => s.id === id),
    fence: () => fence(run),
    flushStreams: () => flushStreams(run),
    leave: <T>(outcome: Outcome) => leave<T>(run, outcome),
    lost: <T>() => lost<T>(run),
    received: (what, seq, output, recorded) => received(run, what, seq, output, recorded),
    callbacks: deps.callbacks,
  };
}
