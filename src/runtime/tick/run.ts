/**
 * The state of one tick (TickRun) and its "run" phase: starting handlers, keeping their leases
 * (heartbeat), and collecting their outcomes as results to write. The loop and the other phases
 * are in tick.ts and tick-flush.ts; they all read and change this one object.
 */
import { emptyTickResult, type Job, type TickResult } from '../../core/types.ts';
import { extendLeases } from '../../store/leases.ts';
import type { FlowLimitRow } from '../../store/flow.ts';
import { toBool } from '../../store/rows.ts';
import { flowLimits } from '../flow/keys.ts';
import { runJob, type RunDeps, type RunningJob } from './run-job.ts';
import { batchRows, isBatchTask, runBatch } from './run-batch.ts';
import type { BatchRow } from '../../store/batches.ts';
import { batchOf } from '../tasks/batch.ts';
import type { Task } from '../tasks/task.ts';
import type { StoredStep } from '../steps/steps.ts';
import { keyOf, runKey, type PendingResult } from './results.ts';
import { createWakeup, startClock } from './timing.ts';
import type { ResolvedTickOptions, SubrequestCounter, TickDeps } from './options.ts';
import type { Row, Sql, Statement } from '../../store/sql.ts';

export const LEASE_GRACE_MS = 5_000;


export interface TickRun {
  readonly deps: TickDeps;
  readonly o: ResolvedTickOptions;
  /** Milliseconds since the budget started. */
  readonly elapsed: () => number;
  /** Ms from the budget's start at which the tick ends (lowered by a stop). */
  deadline: number;
  readonly workerId: string;
  /** Each claiming statement writes its own locked_by (workerId#n): a run's fence names its claim. */
  claimNumber: number;
  readonly taskNames: string[];
  readonly limits: FlowLimitRow[];
  /** The batch tasks (run-batch.ts batchRows): their groups are claimed first. */
  readonly batches: BatchRow[];
  /** Its tasks without `batch`: a claim's probe asks whether a due job of one holds a batch key. */
  readonly unbatched: string[];
  /** Whether that probe saw one (completeAndClaim's stranded_due): the upkeep clears their keys then. */
  strandedDue: boolean;
  readonly counts: TickResult;
  /** Running handlers, by claim (runKey): a later run of the same job never shares an entry. */
  readonly running: Map<string, RunningJob>;
  /** Items of running batch calls beyond the first of each: running.size − batchItems is the calls running. */
  batchItems: number;
  /** Results to write; `progress` and `trace` go into the attempt's history entry. */
  readonly pending: PendingResult[];
  /** Set when a claiming statement failed (it may have committed): this worker may hold jobs it never saw. */
  claimsUnseen: boolean;
  claimEverLost: boolean;
  readonly wakeup: ReturnType<typeof createWakeup>;
  stopping: boolean;
  deadlineReached: boolean;
  /** When a claiming statement last asked whether a lease has expired (completeAndClaim's probeLeases). */
  lastLeaseProbe: number;
  /** Whether that statement saw an expired lease: the reaper is sent only then. */
  reapDue: boolean;
  /** When keying and pruning last ran (reapIntervalMs apart, from the start). */
  lastUpkeep: number;
  lastFire: number;
  /** Whether the last claiming statement saw a due schedule (at the start: unless this process has read the schedules once, TickDeps.schedulesRead). */
  scheduleDue: boolean;
  readonly probeSchedules: boolean;
  /** Whether the last claiming statement saw `on:` jobs left pending for this deployment's tasks (events_due). */
  eventsDue: boolean;
  queueEmpty: boolean;
  failures: number;
  /** The invocation's subrequests (subrequestLimit): every statement of the tick adds one. */
  readonly subrequests: SubrequestCounter;
  /** Set once the subrequest budget left no room to claim with nothing held: the tick stops claiming. */
  outOfSubrequests: boolean;
  /** Statements since the last idle wait that found no work: an idle tick waits pollIntervalMs per statement. */
  statements: number;
  readonly runDeps: RunDeps;
}

/** A new tick's state, its handlers' dependencies wired to it. */
export function openTickRun(given: TickDeps, o: ResolvedTickOptions): TickRun {
  const subrequests = o.subrequestCounter ?? { spent: 0 };
  // Every statement through the tick's port counts (claims, results, heartbeats, reaps, steps).
  const deps = { ...given, sql: countingSql(given.sql, subrequests) };
  // The claims say whether a schedule is due (their schedule_due), so beforeClaim can wait for them.
  const probeSchedules = deps.beforeClaim !== undefined && deps.staticSchedules !== undefined;
  const run = {
    deps,
    o,
    elapsed: startClock(o.startedAt),
    deadline: o.budgetMs,
    workerId: `${o.workerName}:${crypto.randomUUID()}`,
    claimNumber: 0,
    taskNames: [...deps.run.registry.keys()],
    limits: flowLimits(deps.run.registry),
    batches: batchRows(deps.run.registry),
    unbatched: [...deps.run.registry.values()].filter((t) => !isBatchTask(t)).map((t) => t.name),
    strandedDue: false,
    counts: emptyTickResult(),
    running: new Map<string, RunningJob>(),
    batchItems: 0,
    pending: [] as PendingResult[],
    claimsUnseen: false,
    claimEverLost: false,
    wakeup: createWakeup(),
    stopping: false,
    deadlineReached: false,
    lastLeaseProbe: -Infinity,
    reapDue: false,
    lastUpkeep: -Infinity,
    lastFire: -Infinity,
    scheduleDue: !(probeSchedules && deps.schedulesRead?.()),
    probeSchedules,
    eventsDue: false,
    queueEmpty: false,
    failures: 0,
    subrequests,
    outOfSubrequests: false,
    statements: 0,
  } as Omit<TickRun, 'runDeps'> as TickRun;
  (run as { runDeps: RunDeps }).runDeps = {
    ...deps.run,
    abandonAfterMs: Math.min(o.abandonAfterMs, o.marginMs / 2),
    heartbeat: async (job) => (await heartbeat(run, [job])).has(keyOf(job)),
    heartbeatJobs: async (jobs) => {
      const held = await heartbeat(run, jobs);
      return jobs.map((job) => held.has(keyOf(job)));
    },
    // Durable steps: their writes are fenced and extend the lease; they yield before the deadline.
    sql: deps.sql,
    now: deps.now,
    leaseMs: o.leaseMs,
    leaseGraceMs: LEASE_GRACE_MS,
    remainingMs: () => run.deadline - o.marginMs - run.elapsed(),
    maxJobTimeoutMs: o.maxJobTimeoutMs ?? o.budgetMs - o.marginMs,
  };
  return run;
}

/** The port with each statement (or batch) counted as one subrequest. */
function countingSql(sql: Sql, counter: SubrequestCounter): Sql {
  return {
    ...sql,
    query<R extends Row>(s: Statement) {
      counter.spent += 1;
      return sql.query<R>(s);
    },
    batch(statements: readonly Statement[]) {
      counter.spent += 1;
      return sql.batch(statements);
    },
  };
}

/** How often heartbeats renew the running jobs' leases. */
export const heartbeatIntervalMs = (run: TickRun) => Math.max(100, Math.floor(run.o.leaseMs / 3));

/**
 * Subrequests left to spend on new work (subrequestLimit): what the limit leaves after those
 * spent, the results of the jobs held (running or written yet) and their handlers' own, and the
 * heartbeats the rest of the budget may need. Infinity without a limit.
 */
export function subrequestsFree(run: TickRun): number {
  const limit = run.o.subrequestLimit;
  if (limit === undefined) return Infinity;
  // A batch call's items are written together: held as one (runningCalls).
  const held = runningCalls(run) + run.pending.length;
  const heartbeats = Math.ceil(Math.max(0, run.deadline - run.elapsed()) / heartbeatIntervalMs(run));
  return limit - run.subrequests.spent - held * (1 + run.o.subrequestsPerJob) - heartbeats;
}

/** How many jobs a claim may take within the subrequest budget: the claiming statement and the steps' read, then each job's share. */
export function affordableClaims(run: TickRun): number {
  const free = subrequestsFree(run);
  return free === Infinity ? Infinity : Math.max(0, Math.floor((free - 2) / (1 + run.o.subrequestsPerJob)));
}

/** Whether upkeep costing `statements` fits, leaving a job's claim room. */
export function upkeepAffordable(run: TickRun, statements: number): boolean {
  return subrequestsFree(run) - statements - 2 - (1 + run.o.subrequestsPerJob) >= 0;
}

/** Stop claiming: running handlers get drainMs, then the margin. */
export function stopTickRun(run: TickRun): void {
  run.stopping = true;
  run.deadline = Math.min(run.deadline, run.elapsed() + run.o.drainMs + run.o.marginMs);
  run.wakeup.wake();
}

/** Extends these jobs' leases; resolves to the runs (runKey) still held. Reported progress rides along. */
export async function heartbeat(run: TickRun, jobs: readonly Job[]): Promise<Set<string>> {
  const progress = jobs.map((j) => run.running.get(keyOf(j))?.progress.pending());
  const rows = await run.deps.sql.query<{ id: string; locked_by: string; cancel_requested: boolean }>(
    extendLeases({
      now: run.deps.now(),
      workerId: run.workerId,
      jobs: jobs.map((j, i) => ({ id: j.id, attempt: j.attempts, locked_by: j.lockedBy ?? run.workerId, progress: progress[i] && { value: progress[i].value } })),
      leaseMs: run.o.leaseMs,
      leaseGraceMs: LEASE_GRACE_MS,
    }),
  );
  const held = new Set(rows.map((r) => runKey(String(r.id), String(r.locked_by))));
  for (const row of rows) if (toBool(row.cancel_requested)) run.running.get(runKey(String(row.id), String(row.locked_by)))?.stop('cancelled');
  jobs.forEach((j, i) => progress[i] && held.has(keyOf(j)) && run.running.get(keyOf(j))?.progress.written(progress[i].version));
  return held;
}

/** Renews every running job's lease every third of it; a job missing from the answer lost its lease. Returns the stop. */
export function startHeartbeats(run: TickRun): () => void {
  let heartbeating = false;
  const timer = setInterval(async () => {
    if (heartbeating || run.running.size === 0) return;
    heartbeating = true;
    const jobs = [...run.running.values()].map((r) => r.job);
    try {
      const held = await heartbeat(run, jobs);
      // By claim: an answer about an earlier run of a job never stops its later run.
      for (const job of jobs) if (!held.has(keyOf(job))) run.running.get(keyOf(job))?.stop('lease-lost');
    } catch (error) {
      run.deps.log('warn', 'heartbeat failed; leases not extended this time', { error: String(error) });
    } finally {
      heartbeating = false;
    }
  }, heartbeatIntervalMs(run));
  return () => clearInterval(timer);
}

/** The run phase: starts one claimed job's handler; its outcome joins `pending` when it settles. */
export function startJob(run: TickRun, job: Job, steps?: readonly StoredStep[]): void {
  const traced = run.deps.tracing?.runAttempt(job, () => runJob(job, run.runDeps, steps));
  const handle = traced ?? runJob(job, run.runDeps, steps);
  const key = keyOf(job);
  run.running.set(key, handle);
  void handle.settled.then((settled) => {
    if (run.running.get(key) === handle) run.running.delete(key);
    const progress = handle.progress.pending();
    const trace = traced?.traceparent ?? null;
    if (settled.kind !== 'lost') run.pending.push({ job, outcome: settled, trace, ...(progress && { progress: { value: progress.value } }) });
    run.wakeup.wake();
  });
}

/**
 * The run phase for a batch task's jobs claimed together: one handler call (run-batch.ts), in one
 * span, occupying one slot of the tick's concurrency; each item joins `pending` with its outcome.
 */
export function startBatch(run: TickRun, task: Task, jobs: readonly Job[]): void {
  const start = () => runBatch(task, jobs, run.runDeps);
  const traced = run.deps.tracing?.runBatch(task.name, jobs, start);
  const call = traced ?? start();
  const trace = traced?.traceparent ?? null;
  // The call's items in `running` beyond the first: kept equal to (items left − 1) as each leaves.
  let left = call.items.length;
  run.batchItems += left - 1;
  for (const handle of call.items) {
    const key = keyOf(handle.job);
    run.running.set(key, handle);
    void handle.settled.then((settled) => {
      if (run.running.get(key) === handle) run.running.delete(key);
      if ((left -= 1) > 0) run.batchItems -= 1;
      if (settled.kind !== 'lost') run.pending.push({ job: handle.job, outcome: settled, trace });
      if (left === 0) run.wakeup.wake();
    });
  }
}

/**
 * Starts the calls of the batch tasks' jobs among `claimed` (the claim's `batch_group` says which
 * were claimed together: `groups[i]` for `claimed[i]`; a job claimed alone, e.g. enqueued without
 * its batch key, is a call of one), and returns the other jobs, to start one by one, and how many
 * calls it started.
 */
export function startBatches(run: TickRun, claimed: readonly Job[], groups: readonly unknown[]): { singles: Job[]; calls: number } {
  const singles: Job[] = [];
  const calls = new Map<string, Job[]>();
  claimed.forEach((job, i) => {
    const task = run.deps.run.registry.get(job.task);
    if (!isBatchTask(task)) return void singles.push(job);
    const key = `${job.task}\u0000${groups[i] ?? `one:${job.id}`}`;
    calls.set(key, [...(calls.get(key) ?? []), job]);
  });
  let started = 0;
  for (const jobs of calls.values()) {
    const task = run.deps.run.registry.get(jobs[0]!.task)!;
    const size = batchOf(task)!.maxSize;
    for (let i = 0; i < jobs.length; i += size, started += 1) startBatch(run, task, jobs.slice(i, i + size));
  }
  return { singles, calls: started + singles.length };
}

/** The handler calls running: a batch call counts once, however many items it holds. */
export const runningCalls = (run: TickRun): number => run.running.size - run.batchItems;

/** What this worker holds and knows of: running, or with a result still to write. */
export function knownJobIds(run: TickRun): string[] {
  return [...new Set([...[...run.running.values()].map((r) => r.job.id), ...run.pending.map((p) => p.job.id)])];
}

/** Whether reapIntervalMs has passed since `last` (and upkeep is on: reapIntervalMs > 0). */
export function upkeepDue(run: TickRun, last: number): boolean {
  return run.o.reapIntervalMs > 0 && run.elapsed() - last >= run.o.reapIntervalMs;
}

/** Whether the next claiming statement asks about expired leases: at the start, then every reapIntervalMs. */
export function leaseProbeDue(run: TickRun): boolean {
  return upkeepDue(run, run.lastLeaseProbe);
}
