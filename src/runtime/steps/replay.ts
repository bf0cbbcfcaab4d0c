/**
 * The replay check (docs/steps.md, "Changing a workflow's code"): runs this deployment's handlers
 * against the steps recorded by in-flight and recent jobs, without running any step function and
 * without writing anything, and reports each job the current code would fail on its next run.
 * Made to run in CI before a deploy (`npx skiplock replay --tasks <module>`), against a copy of
 * production or production read-only: it sends two SELECTs.
 *
 * The handler runs for real outside steps (as every replay does): code there must be
 * deterministic already. It is stopped (its signal aborted, its pending promise left unsettled)
 * at the first point where a real run would do new work: a step not recorded (new code past the
 * recorded history: fine), a step recorded as failed (it would run again), a sleep still
 * sleeping, an invoke still waiting, ctx.enqueue (a write).
 */
import * as z from 'zod';
import { ChildJobError, SkiplockError } from '../../core/errors.ts';
import { JOB_STATUSES, type Job, type StepKind } from '../../core/types.ts';
import { listJobSteps, replayCandidates } from '../../store/steps.ts';
import { mapJob, mapJobStep } from '../../store/rows.ts';
import type { Sql } from '../../store/sql.ts';
import { toIssues } from '../tasks/enqueue.ts';
import { createHistoryCursor, type HistoryCursor } from './history.ts';
import type { StoredStep } from './steps.ts';
import type { TaskContext, TaskRegistry } from '../tasks/task.ts';

export const REPLAY_LIMIT = { default: 1000, max: 10_000 } as const;
/** A handler that reaches no step, sleep or end in this long is reported (it waits on something outside steps). */
export const REPLAY_TIMEOUT_MS = 5000;

const status = z.preprocess((value) => (typeof value === 'string' ? value.toUpperCase() : value), z.enum(JOB_STATUSES));
export const checkReplayInputSchema = z.strictObject({
  /** Only this task's jobs (it must be registered here). Default: every task registered here. */
  task: z.string().min(1).max(200).optional(),
  /** Only these jobs. */
  ids: z.array(z.string().regex(/^[1-9]\d{0,18}$/)).max(REPLAY_LIMIT.max).optional(),
  /** Default QUEUED, RUNNING, WAITING, DEAD: the jobs that may run again (DEAD ones by a person's retry). */
  status: z.union([status, z.array(status).min(1)]).optional(),
  /** The newest this many jobs with recorded steps. Default 1000, at most 10,000. */
  limit: z.number().int().min(1).max(REPLAY_LIMIT.max).optional(),
});
export type CheckReplayInput = z.input<typeof checkReplayInputSchema>;

export interface ReplayFailure {
  id: string;
  task: string;
  /** What the next run would do: the nondeterminism error it would die of, or what else is wrong. */
  reason: string;
}

export interface CheckReplayResult {
  /** Jobs replayed. */
  checked: number;
  failures: ReplayFailure[];
}

export function createReplayCheck(sql: Sql, registry: TaskRegistry) {
  return {
    async checkReplay(raw: CheckReplayInput = {}): Promise<CheckReplayResult> {
      const parsed = checkReplayInputSchema.safeParse(raw);
      if (!parsed.success) throw new SkiplockError('invalid_request', 'invalid replay check', toIssues(parsed.error));
      const input = parsed.data;
      if (input.task !== undefined && !registry.has(input.task)) throw new SkiplockError('unknown_task', `task ${JSON.stringify(input.task)} is not registered here: its handler cannot be replayed`);
      const statuses = input.status === undefined ? ['QUEUED', 'RUNNING', 'WAITING', 'DEAD'] : Array.isArray(input.status) ? input.status : [input.status];
      const jobs = (await sql.query(replayCandidates({
        tasks: input.task === undefined ? [...registry.keys()] : [input.task], ids: input.ids ?? null, statuses, limit: input.limit ?? REPLAY_LIMIT.default,
      }))).map(mapJob);
      const steps = new Map<string, StoredStep[]>();
      if (jobs.length > 0) {
        for (const row of await sql.query(listJobSteps({ jobIds: jobs.map((j) => j.id) }))) {
          const list = steps.get(String(row.job_id)) ?? [];
          list.push({ ...mapJobStep(row), childStatus: (row.child_status ?? null) as StoredStep['childStatus'] });
          steps.set(String(row.job_id), list);
        }
      }
      const failures: ReplayFailure[] = [];
      for (const job of jobs) {
        const reason = await replayOne(registry, job, steps.get(job.id) ?? []);
        if (reason !== undefined) failures.push({ id: job.id, task: job.task, reason });
      }
      return { checked: jobs.length, failures };
    },
  };
}

const never = <T>(): Promise<T> => new Promise<T>(() => {});
const isDone = (row: StoredStep | undefined | typeof HALT) => row !== HALT && row?.status === 'done';

/**
 * Where the current code reaches a step that is not recorded (restartJob's `fromStep` named by the
 * new code, src/runtime/steps/restart.ts): replays the job until the handler calls `stepId`, and answers
 * the recorded entry at that point (the first one to forget; undefined: nothing recorded after),
 * or why the replay could not get there.
 */
export async function locateStep(registry: TaskRegistry, job: Job, stored: readonly StoredStep[], stepId: string): Promise<{ next: StoredStep | undefined } | { reason: string }> {
  let located: { next: StoredStep | undefined } | undefined;
  const reason = await replayOne(registry, job, stored, { stopAt: stepId, onStop: (next) => (located = { next }) });
  if (located && reason === undefined) return located;
  return { reason: reason ?? `the current code of ${job.task} does not reach a step ${JSON.stringify(stepId)} on this job's recorded path` };
}

interface ReplayOptions {
  /** Stop (and pass) when the handler calls this step id, before matching it: onStop gets the next recorded entry. */
  stopAt?: string;
  onStop?(next: StoredStep | undefined): void;
}

/** A reach() answer: the handler called `stopAt`. */
const HALT = Symbol('halt');

/** Replays one job; the reason its next run would fail, or undefined when it would not. */
async function replayOne(registry: TaskRegistry, job: Job, stored: readonly StoredStep[], options: ReplayOptions = {}): Promise<string | undefined> {
  const task = registry.get(job.task)!;
  const payload = task.payload.safeParse(job.payload);
  if (!payload.success) return `invalid payload for the current schema: ${payload.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ')}`;
  let finish!: (reason: string | undefined) => void;
  const settled = new Promise<string | undefined>((resolve) => (finish = resolve));
  const replay: Replay = { history: createHistoryCursor(stored), stored, controller: new AbortController(), used: new Set<string>(), options, fatal: undefined, finish };
  const ctx = replayContext(replay, job);
  const timer = setTimeout(() => finish(replay.fatal ?? `the handler reached no step and did not end within ${REPLAY_TIMEOUT_MS} ms (is it waiting on something outside steps?)`), REPLAY_TIMEOUT_MS);
  Promise.resolve()
    .then(() => task.handler(payload.data, ctx))
    .then(
      () => finish(replay.fatal ?? removedSteps(replay.history)),
      // An error of the handler's own (not the determinism rule's) fails an attempt as it would have before the deploy.
      () => finish(replay.fatal),
    );
  try {
    return await settled;
  } finally {
    clearTimeout(timer);
  }
}

/** One job's replay: its walk of the history, and how it ends. */
interface Replay {
  readonly history: HistoryCursor;
  readonly stored: readonly StoredStep[];
  readonly controller: AbortController;
  readonly used: Set<string>;
  readonly options: ReplayOptions;
  /** What a real run would die of: remembered (the first one wins, even if the handler catches it). */
  fatal: string | undefined;
  /** Settles the replay with its answer (the first call wins). */
  finish(reason: string | undefined): void;
}

/** New work reached: the replay passes, the handler is left where it is. */
function stop<T>(replay: Replay): Promise<T> {
  replay.controller.abort(new Error('the replay check stopped here'));
  replay.finish(replay.fatal);
  return never<T>();
}

/** What a real run would die of, remembered, and thrown to the handler. */
function die(replay: Replay, message: string): never {
  replay.fatal ??= message;
  throw new Error(message);
}

/** The determinism rule for one call: the recorded entry it reaches (undefined: new work), or HALT at `stopAt`. */
function reach(replay: Replay, id: unknown, kind: Exclude<StepKind, 'patch'>): StoredStep | undefined | typeof HALT {
  if (typeof id !== 'string' || id.length === 0) return die(replay, `ctx.${kind}: the step id must be a non-empty string`);
  if (id === replay.options.stopAt && replay.fatal === undefined) {
    replay.options.onStop?.(replay.history.next());
    return HALT;
  }
  if (replay.used.has(id)) return die(replay, `duplicate step id ${JSON.stringify(id)}`);
  replay.used.add(id);
  const reached = replay.history.reach(id, kind);
  if (!reached.ok) return die(replay, reached.transient ? `${reached.message} (retried, then DEAD once its attempts run out)` : reached.message);
  return reached.row;
}

/** The handler's ctx in a replay: a recorded step returns its stored outcome, anything new stops the replay. */
function replayContext(replay: Replay, job: Job): TaskContext {
  return {
    signal: replay.controller.signal,
    job,
    attempt: job.attempts + 1,
    idempotencyKey: `skiplock:${job.id}`,
    heartbeat: async () => true,
    enqueue: () => stop(replay),
    progress: () => {},
    state: job.scheduleName === null ? undefined : (job.scheduleState ?? null),
    setState: () => {},
    step: async <T>(id: string): Promise<Awaited<T>> => {
      const row = reach(replay, id, 'step');
      return row !== HALT && row?.status === 'done' ? (row.output as Awaited<T>) : stop<Awaited<T>>(replay);
    },
    sleep: async (id) => (isDone(reach(replay, id, 'sleep')) ? undefined : stop(replay)),
    sleepUntil: async (id) => (isDone(reach(replay, id, 'sleep')) ? undefined : stop(replay)),
    invoke: async (id, childTask, ..._payload) => {
      const row = reach(replay, id, 'invoke');
      if (row === HALT) return stop(replay);
      if (row?.status === 'done') return row.output as never;
      if (row?.status === 'failed')
        throw new ChildJobError({ stepId: id, childId: row.childId ?? '?', childTask: row.childTask ?? childTask, childStatus: row.childStatus === 'DEAD' ? 'DEAD' : 'CANCELLED', childError: row.error });
      return stop(replay);
    },
    patched: (id) => replay.history.patched(id).value,
    // Events and callbacks (src/runtime/steps/event-waits.ts): a recorded completed wait returns its stored value.
    waitForEvent: async (id) => {
      const row = reach(replay, id, 'event');
      return row !== HALT && row?.status === 'done' ? (row.output ?? null) as never : stop(replay);
    },
    waitForAny: async (id) => {
      const row = reach(replay, id, 'any-event');
      return row !== HALT && row?.status === 'done' ? (row.output ?? null) as never : stop(replay);
    },
    createCallback: async (id) => {
      const row = reach(replay, id, 'callback');
      return row !== HALT && row !== undefined ? { url: '(a callback URL)' } : stop(replay);
    },
    // A replay writes nothing: a stream's chunks are dropped.
    stream: () => ({ write: () => {}, close: async () => {} }),
    waitForCallback: async (id) => {
      const row = replay.stored.find((s) => s.id === id && s.kind === 'callback');
      return row?.status === 'done' ? (row.output ?? null) as never : stop(replay);
    },
  };
}

/** The handler returned: a removed step when it left recorded steps unreached (the run would end DONE, skipping them). */
function removedSteps(history: HistoryCursor): string | undefined {
  const missed = history.unreached();
  return missed.length === 0 ? undefined
    : `the handler returned without reaching the recorded step${missed.length > 1 ? 's' : ''} ${missed.map((s) => JSON.stringify(s.id)).join(', ')}: a removed step (the run would end DONE, skipping ${missed.length > 1 ? 'them' : 'it'})`;
}
