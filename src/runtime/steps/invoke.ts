/**
 * ctx.invoke for one run of a job (docs/steps.md): a child job enqueued as a step, the parent
 * left WAITING until the child ends. The child is checked as an HTTP enqueue of it would be; the
 * invokes a handler reaches in one turn (Promise.all) are written together by one fenced
 * statement (src/store/steps.ts invokeChildren) once the turn is over. A recorded invoke returns
 * the child's result, or throws a ChildJobError for a child that ended DEAD or CANCELLED.
 */
import { ChildJobError, isPermanent, PermanentError, SkiplockError } from '../../core/errors.ts';
import { invokeChildren, type InvokeRow } from '../../store/steps.ts';
import { prepareEnqueue, refuseUnfittableTimeouts } from '../tasks/enqueue.ts';
import type { TaskRegistry } from '../tasks/task.ts';
import { fence, flushStreams, leave, reach, stoppedError, type RunState } from './run-state.ts';
import type { StoredStep } from './types.ts';

interface PendingInvoke {
  row: InvokeRow;
  reject(error: unknown): void;
}

export type Invoke = <R = unknown>(id: string, task: string, payload?: unknown) => Promise<R>;

/** ctx.invoke, with the batch of the invokes reached in the current turn. */
export function createInvoke(run: RunState): Invoke {
  let pending: PendingInvoke[] = [];
  const flush = () => {
    const batch = pending;
    pending = [];
    return flushInvokes(run, batch);
  };
  return async <R>(id: string, taskName: string, payload: unknown): Promise<R> => {
    const { seq, row } = reach(run, id, 'invoke');
    if (row) return recordedInvoke<R>(run, id, taskName, row);
    const job = childRow(run, id, taskName, payload);
    return new Promise<R>((_resolve, reject) => {
      if (pending.length === 0) setTimeout(() => void flush(), 0);
      pending.push({ row: { step: id, seq, job }, reject });
    });
  };
}

/**
 * A recorded invoke: the child's result, its end as a ChildJobError, or (still waiting: the run
 * was woken early) wait again. The result is returned as a value, not a promise, so ctx.invoke
 * settles in as many turns as it always did (the order of a replay's parallel steps hangs on it).
 */
function recordedInvoke<R>(run: RunState, id: string, taskName: string, row: StoredStep): R | Promise<R> {
  if (row.status === 'done') return row.output as R;
  if (row.status === 'failed') {
    throw new ChildJobError({ stepId: id, childId: row.childId ?? '?', childTask: row.childTask ?? taskName, childStatus: row.childStatus === 'DEAD' ? 'DEAD' : 'CANCELLED', childError: row.error });
  }
  return leave(run, { kind: 'wait' });
}

/** The child's job row, checked as an HTTP enqueue of it is; a refusal is permanent (the same payload fails on every run). */
function childRow(run: RunState, id: string, taskName: string, payload: unknown): InvokeRow['job'] {
  const { deps, job } = run;
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
  return jobRow;
}

/** The invokes reached in one turn (Promise.all), written together once the turn is over. */
async function flushInvokes(run: RunState, batch: readonly PendingInvoke[]): Promise<void> {
  const { deps } = run;
  if (batch.length === 0 || deps.ended()) return;
  if (deps.signal.aborted) {
    for (const b of batch) b.reject(stoppedError(deps.signal));
    return;
  }
  try {
    if (!(await flushStreams(run))) return;
    const rows = await deps.sql.query(invokeChildren({ ...fence(run), children: batch.map((b) => b.row) }));
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
