/**
 * One tick: what every invocation (cron, alarm, HTTP request, Node timer) runs.
 *
 *   fire due schedules (at the start, then at most every fireIntervalMs)
 *   reap expired leases (at the start, then at most every reapIntervalMs), and prune finished
 *     jobs past their retention (at most once a minute per process)
 *   until the deadline, or until idle when asked:
 *     write finished results + claim free slots ... one statement (completeAndClaim)
 *     run handlers ................................ each under its own AbortSignal
 *     heartbeat long jobs ......................... every leaseMs / 3; a lost lease aborts
 *
 * Results that finish together are written together, and the same round trip claims the next
 * jobs, so a busy tick costs one statement per batch.
 */
import type { Outcome } from '../core/state.ts';
import { emptyTickResult, type Job, type TickResult } from '../core/types.ts';
import { describeError } from '../core/errors.ts';
import { storableText } from '../core/json.ts';
import { completeAndClaim, extendLeases, reapExpiredLeases, releaseUnseenClaims } from '../store/jobs.ts';
import { mapJob, toBool } from '../store/rows.ts';
import type { Row, Sql } from '../store/sql.ts';
import type { Logger, WarnOnce } from './log.ts';
import { adoptUnkeyedJobs, flowLimits } from './flow-key.ts';
import { runJob, type RunDeps, type RunningJob } from './run-job.ts';
import { loadSteps, type StoredStep } from './steps.ts';
import { released } from '../core/state.ts';
import { asIds, isRefusal, keyOf, runKey, takeBatch, tally, toResultRow, type PendingResult } from './tick-results.ts';
import { createWakeup, startClock, yieldToIo } from './tick-timing.ts';
import type { Tracing } from './tracing.ts';

export interface TickOptions {
  /** How long the tick may run, in ms from its start (the invocation's budget). Default 30 000. */
  budgetMs?: number;
  /** Return as soon as nothing is due and nothing runs, instead of polling until the budget ends. Default false. */
  untilIdle?: boolean;
  /** Handlers running at once. Default 10. */
  concurrency?: number;
  /**
   * Kept free at the end of the budget: handlers are aborted `marginMs` before it ends, and no job
   * is claimed whose timeout does not fit before that. Default 1 000.
   */
  marginMs?: number;
  /**
   * The longest job timeout any tick of this deployment can claim (on Cloudflare the cron's or
   * the alarm's, not this HTTP tick's): a ctx.invoke of a child whose timeout is longer rejects
   * with a PermanentError and enqueues nothing, as an HTTP enqueue of it is refused. Default:
   * this tick's budgetMs − marginMs.
   */
  maxJobTimeoutMs?: number;
  /** After an abort, how long a handler has to stop before it is abandoned; at most marginMs / 2, so that its result is written by the deadline. Default 250. */
  abandonAfterMs?: number;
  /**
   * Wait between claims while the queue is empty, in ms. An idle tick makes at most one statement
   * per pollIntervalMs on average: after a poll that took k statements (a reap, a firing) it
   * waits k · pollIntervalMs, and a due reap takes a poll's place: an idle minute costs at most
   * 60 statements at the default. Default 1 000.
   */
  pollIntervalMs?: number;
  /** Lease for long jobs, renewed every third of it; short jobs get timeout + 5 s. Default 30 000. */
  leaseMs?: number;
  /** Reap expired leases at the start and at most this often (ms); 0 turns reaping off. Default 10 000. */
  reapIntervalMs?: number;
  /** Fire due schedules at the start and at most this often (ms); 0 fires only at the start. Default 1 000. */
  fireIntervalMs?: number;
  /** A name for this worker in locked_by; a random suffix is always added. Default "tick". */
  workerName?: string;
  /** Aborting it stops claiming; running handlers get `drainMs` to finish, then are released. */
  signal?: AbortSignal;
  /** See `signal`. Default 10 000. */
  drainMs?: number;
  /**
   * When the budget began, as a `performance.now()` instant: an HTTP request's arrival, so that
   * the work done before the tick (an enqueue) counts against the platform's limit. Default: when
   * tick() is called. A value in the future or not finite is ignored.
   */
  startedAt?: number;
}

export interface TickDeps {
  sql: Sql;
  run: Omit<RunDeps, 'heartbeat' | 'abandonAfterMs' | 'sql' | 'now' | 'leaseMs' | 'leaseGraceMs' | 'remainingMs' | 'maxJobTimeoutMs'>;
  /** The clock passed into SQL: null means the database's now(). Tests pass instants in. */
  now: () => Date | null;
  /**
   * Fires due schedules, before the first claim and then, at most every fireIntervalMs, when the
   * claiming statement says a schedule is due (see staticSchedules); returns how many jobs it created.
   */
  beforeClaim?: () => Promise<number>;
  /**
   * The static schedules beforeClaim fires. Given, the claiming statement also tells whether a
   * schedule is due, and beforeClaim runs only then (one statement per idle poll, not two).
   * Absent, beforeClaim runs every fireIntervalMs.
   */
  staticSchedules?: readonly string[];
  /** Upkeep run beside the reaper (retention: pruning finished jobs, rate-limited by its owner); resolves true when it ran a statement. */
  housekeeping?: () => Promise<boolean | void>;
  log: Logger;
  warnOnce: WarnOnce;
  /** OpenTelemetry (src/runtime/tracing.ts): each attempt runs in its span. Default none. */
  tracing?: Tracing | null;
}

const LEASE_GRACE_MS = 5_000;

export const TICK_DEFAULTS = {
  budgetMs: 30_000,
  untilIdle: false,
  concurrency: 10,
  marginMs: 1_000,
  abandonAfterMs: 250,
  pollIntervalMs: 1_000,
  leaseMs: 30_000,
  reapIntervalMs: 10_000,
  fireIntervalMs: 1_000,
  workerName: 'tick',
  drainMs: 10_000,
} as const;

export async function tick(deps: TickDeps, options: TickOptions = {}): Promise<TickResult> {
  const o = { ...TICK_DEFAULTS, ...options };
  const { sql, now } = deps;
  const elapsed = startClock(o.startedAt);
  let deadline = o.budgetMs;
  const workerId = `${o.workerName}:${crypto.randomUUID()}`;
  /** Each claiming statement writes its own locked_by (workerId#n): a run's fence names its claim. */
  let claimNumber = 0;
  const taskNames = [...deps.run.registry.keys()];
  const limits = flowLimits(deps.run.registry);
  const counts = emptyTickResult();
  /** Running handlers, by claim (runKey): a later run of the same job never shares an entry. */
  const running = new Map<string, RunningJob>();
  /** Set when a claiming statement failed (it may have committed): this worker may hold jobs it never saw. */
  let claimsUnseen = false;
  let claimEverLost = false;
  /** `progress` and `trace` go into the attempt's history entry (src/store/history.ts). */
  const pending: PendingResult[] = [];
  const wakeup = createWakeup();
  let stopping = false;
  let deadlineReached = false;
  let lastReap = -Infinity;
  let lastFire = -Infinity;
  /** Whether the last claiming statement saw a due schedule (always fire at the start). */
  let scheduleDue = true;
  const probeSchedules = deps.beforeClaim !== undefined && deps.staticSchedules !== undefined;
  let queueEmpty = false;
  let failures = 0;
  /** Statements since the last idle wait: an idle tick waits pollIntervalMs per statement. */
  let statements = 0;

  const onStop = () => {
    stopping = true;
    deadline = Math.min(deadline, elapsed() + o.drainMs + o.marginMs);
    wakeup.wake();
  };
  warnUnclaimableTasks(deps, o.budgetMs - o.marginMs);
  if (o.signal?.aborted) onStop();
  o.signal?.addEventListener('abort', onStop, { once: true });

  const heartbeat = async (jobs: readonly Job[]): Promise<Set<string>> => {
    // Progress reported since the last write rides along (ctx.progress costs no round trip).
    const progress = jobs.map((j) => running.get(keyOf(j))?.progress.pending());
    const rows = await sql.query<{ id: string; locked_by: string; cancel_requested: boolean }>(
      extendLeases({
        now: now(),
        workerId,
        jobs: jobs.map((j, i) => ({ id: j.id, attempt: j.attempts, locked_by: j.lockedBy ?? workerId, progress: progress[i] && { value: progress[i].value } })),
        leaseMs: o.leaseMs,
        leaseGraceMs: LEASE_GRACE_MS,
      }),
    );
    const held = new Set(rows.map((r) => runKey(String(r.id), String(r.locked_by))));
    for (const row of rows) if (toBool(row.cancel_requested)) running.get(runKey(String(row.id), String(row.locked_by)))?.stop('cancelled');
    jobs.forEach((j, i) => progress[i] && held.has(keyOf(j)) && running.get(keyOf(j))?.progress.written(progress[i].version));
    return held;
  };
  const runDeps: RunDeps = {
    ...deps.run,
    abandonAfterMs: Math.min(o.abandonAfterMs, o.marginMs / 2),
    heartbeat: async (job) => (await heartbeat([job])).has(keyOf(job)),
    // Durable steps: their writes are fenced and extend the lease; they yield before the deadline.
    sql,
    now,
    leaseMs: o.leaseMs,
    leaseGraceMs: LEASE_GRACE_MS,
    remainingMs: () => deadline - o.marginMs - elapsed(),
    maxJobTimeoutMs: o.maxJobTimeoutMs ?? o.budgetMs - o.marginMs,
  };

  // Renews every running job's lease; any job missing from the answer lost its lease.
  let heartbeating = false;
  const heartbeatTimer = setInterval(async () => {
    if (heartbeating || running.size === 0) return;
    heartbeating = true;
    const jobs = [...running.values()].map((r) => r.job);
    try {
      const held = await heartbeat(jobs);
      // By claim: an answer about an earlier run of a job never stops its later run.
      for (const job of jobs) if (!held.has(keyOf(job))) running.get(keyOf(job))?.stop('lease-lost');
    } catch (error) {
      deps.log('warn', 'heartbeat failed; leases not extended this time', { error: String(error) });
    } finally {
      heartbeating = false;
    }
  }, Math.max(100, Math.floor(o.leaseMs / 3)));

  const start = (job: Job, steps?: readonly StoredStep[]) => {
    const traced = deps.tracing?.runAttempt(job, () => runJob(job, runDeps, steps));
    const run = traced ?? runJob(job, runDeps, steps);
    const key = keyOf(job);
    running.set(key, run);
    void run.settled.then((settled) => {
      if (running.get(key) === run) running.delete(key);
      const progress = run.progress.pending();
      const trace = traced?.traceparent ?? null;
      if (settled.kind !== 'lost') pending.push({ job, outcome: settled, trace, ...(progress && { progress: { value: progress.value } }) });
      wakeup.wake();
    });
  };

  /** What this worker holds and knows of: running, or with a result still to write. */
  const known = () => [...new Set([...[...running.values()].map((r) => r.job.id), ...pending.map((p) => p.job.id)])];

  /** Gives back the jobs a claim whose answer was lost took (see releaseUnseenClaims); false if it failed. */
  const giveBackUnseen = async (): Promise<boolean> => {
    statements += 1;
    try {
      const released = await sql.query<{ id: string }>(releaseUnseenClaims({ now: now(), workerId, known: known() }));
      if (released.length > 0) deps.log('warn', 'gave back jobs claimed by a statement whose answer was lost', { jobs: released.map((r) => String(r.id)) });
      return true;
    } catch (error) {
      deps.log('warn', 'giving back unseen claims failed; retrying', { error: String(error) });
      return false;
    }
  };

  const backOff = async () => {
    failures += 1;
    await wakeup.sleep(Math.min(100 * 2 ** Math.min(failures, 5), Math.max(0, deadline - elapsed())));
  };

  const flush = async (free: number) => {
    // A result that failed to write alone is retried alone, without a claim (see onWriteRefused).
    const isolated = pending[0]?.suspect === true;
    const batch = isolated ? pending.splice(0, 1) : takeBatch(pending);
    const limit = isolated ? 0 : free;
    const token = limit > 0 ? `${workerId}#${(claimNumber += 1)}` : workerId;
    statements += 1;
    let rows: Row[];
    try {
      const claim = completeAndClaim({
        now: now(),
        workerId: token,
        results: batch.map(({ job, outcome, progress, trace }) => ({ ...toResultRow(job, outcome), progress, trace })),
        limit,
        budgetMs: Math.max(0, Math.floor(deadline - o.marginMs - elapsed())),
        leaseMs: o.leaseMs,
        leaseGraceMs: LEASE_GRACE_MS,
        tasks: taskNames,
        staticSchedules: probeSchedules ? deps.staticSchedules : null,
        flowLimits: limits,
        fanIn: batch.some(({ job }) => job.parentId !== null),
      });
      rows = await sql.query(claim);
    } catch (error) {
      // (With no result to blame, a refusal is the claim's: backed off below like any failure.)
      if (isRefusal(error) && batch.length > 0) {
        onWriteRefused(batch, isolated, error);
        return;
      }
      // The write may or may not have landed; writing it again is safe because it is fenced. So
      // may the claim: jobs it took are ours but unseen, given back before anything else is claimed.
      pending.unshift(...batch);
      if (limit > 0) claimsUnseen = claimEverLost = true;
      deps.log('warn', 'tick statement failed; retrying', { error: String(error), failures: failures + 1 });
      await backOff();
      return;
    }
    failures = 0;
    const summary = rows.find((row) => row.written !== null && row.written !== undefined);
    tally(counts, batch, new Set(asIds(summary?.written)), new Set(asIds(summary?.cancelled)), deps.log);
    if (probeSchedules && summary) scheduleDue = toBool(summary.schedule_due);
    const claimed = rows.filter((row) => row.id !== null && row.id !== undefined).map(mapJob);
    counts.claimed += claimed.length;
    if (claimed.some((job) => job.stepCount > 0)) await startDurable(claimed);
    else claimed.forEach((job) => start(job));
    // A job put back due now is not taken by this statement's claim: a statement updates a row
    // once (the claim functions read fresh snapshots, not the statement's one; migration 015): look again.
    // So may a parent a child's end woke (the fan-in), or one whose children had all ended (wait).
    const requeuedNow = batch.some(({ job, outcome }) =>
      outcome.kind === 'release' || outcome.kind === 'wait' || job.parentId !== null || (outcome.kind === 'suspend' && outcome.runAt === null) || (outcome.kind === 'retry' && outcome.delayMs === 0));
    if (limit > 0) queueEmpty = claimed.length < limit && !requeuedNow;
    else if (isolated && requeuedNow) queueEmpty = false;
  };

  /**
   * Claimed jobs with durable steps: their recorded steps are read first (one statement for the
   * batch). If that read fails, those jobs are released (due now, the attempt given back).
   */
  const startDurable = async (claimed: readonly Job[]) => {
    let steps: Map<string, StoredStep[]>;
    try {
      steps = await loadSteps(sql, now(), claimed);
    } catch (error) {
      deps.log('warn', 'reading the steps of claimed jobs failed; releasing them', { error: String(error) });
      for (const job of claimed) {
        if (job.stepCount > 0) pending.push({ job, outcome: released('their steps could not be read') });
        else start(job);
      }
      return;
    }
    for (const job of claimed) start(job, steps.get(job.id) ?? []);
  };

  /**
   * The database refused the statement for what it carries (a data or constraint error), so
   * sending it again would fail again. Several results: each is written alone from now on, so
   * one bad row cannot hold back the others. One result written alone: it is the bad row; it is
   * written as DEAD without its result, saying why; if even that is refused, it is left to the
   * reaper.
   */
  const onWriteRefused = (batch: PendingResult[], isolated: boolean, error: unknown) => {
    if (!isolated || batch.length > 1) {
      pending.unshift(...batch.map((p) => ({ ...p, suspect: true })));
      deps.log('warn', 'the database refused a result write; writing its results one by one', { error: describeError(error), jobs: batch.map((p) => p.job.id) });
      return;
    }
    const [bad] = batch as [PendingResult];
    if (bad.rewritten) {
      deps.log('error', 'the database refused even the DEAD write of a result; the reaper will return this job', { job: bad.job.id, error: describeError(error) });
      return;
    }
    const outcome: Outcome = { kind: 'dead', error: storableText(`the result could not be written: ${describeError(error)}`) };
    deps.log('error', 'the database refused a result; writing the job as DEAD', { job: bad.job.id, error: describeError(error) });
    pending.unshift({ job: bad.job, outcome, suspect: true, rewritten: true });
  };

  try {
    for (;;) {
      const remaining = deadline - elapsed();
      if (remaining <= 0 && pending.length > 0) {
        deps.log('error', 'deadline passed with results unwritten; the reaper will return these jobs', { jobs: pending.map((p) => p.job.id) });
        break;
      }
      if (remaining <= o.marginMs && !deadlineReached) {
        deadlineReached = true;
        for (const run of running.values()) run.stop(stopping ? 'shutdown' : 'deadline');
      }
      // Jobs a lost answer claimed come first: nothing more is claimed while they are outstanding.
      if (claimsUnseen) {
        if (remaining <= 0) break;
        if (await giveBackUnseen()) {
          claimsUnseen = false;
          failures = 0;
          queueEmpty = false;
        } else {
          await backOff();
        }
        continue;
      }
      const claiming = !stopping && !deadlineReached;
      if (claiming && deps.beforeClaim && scheduleDue && elapsed() - lastFire >= (o.fireIntervalMs || Infinity)) {
        lastFire = elapsed();
        if (probeSchedules) scheduleDue = false; // until a claiming statement says so again
        statements += 2; // at most: the read, and the firing when something was due
        const fired = await deps.beforeClaim().catch((error: unknown) => {
          deps.log('error', 'firing schedules failed', { error: String(error) });
          return 0;
        });
        counts.fired += fired;
        if (fired > 0) queueEmpty = false;
      }
      if (claiming && o.reapIntervalMs > 0 && elapsed() - lastReap >= o.reapIntervalMs) {
        lastReap = elapsed();
        statements += 1;
        if (await reap(sql, now(), counts).catch((error: unknown) => deps.log('warn', 'reaping failed', { error: String(error) }))) queueEmpty = false;
        // Jobs of limited tasks enqueued without their keys: keyed here, or no claim would take them.
        const adopted = limits.length === 0 ? 0 : await adoptUnkeyedJobs(sql, deps.run.registry, now()).catch((error: unknown) => {
          deps.log('warn', 'keying jobs of limited tasks failed', { error: String(error) });
          return 0;
        });
        if (adopted > 0) queueEmpty = false;
        const pruned = await deps.housekeeping?.().catch((error: unknown) => deps.log('warn', 'pruning finished jobs failed', { error: String(error) }));
        if (pruned === true) statements += 1;
      }
      const free = claiming ? o.concurrency - running.size : 0;
      if (pending.length > 0 || (free > 0 && !queueEmpty)) {
        await flush(free);
        continue;
      }
      if (running.size === 0 && (!claiming || o.untilIdle)) break;
      // Wait for a handler to finish, for the next poll when slots are free, or for the deadline.
      // Idle, a poll that took k statements waits k polls: at most one statement per pollIntervalMs.
      const untilDeadline = Math.max(0, remaining - (deadlineReached ? 0 : o.marginMs));
      const poll = o.pollIntervalMs * Math.max(1, running.size === 0 ? statements : 1);
      statements = 0;
      const woke = await wakeup.sleep(free > 0 ? Math.min(poll, untilDeadline) : untilDeadline);
      // Time to poll again, unless the reaper is due: then its statement is this poll's (it says
      // whether it returned jobs; if so, they are claimed at once).
      if (!woke && !(o.reapIntervalMs > 0 && elapsed() - lastReap >= o.reapIntervalMs)) queueEmpty = false;
      // Let handlers that finish in the same moment join one write. setImmediate waits for pending
      // I/O without setTimeout's 1 ms floor, which cost a fifth of each 100-job round trip.
      await yieldToIo();
    }
  } finally {
    clearInterval(heartbeatTimer);
    o.signal?.removeEventListener('abort', onStop);
  }
  if (claimEverLost) {
    // Once more at the end: a lost statement may have committed after the give-back above. Jobs
    // still pending (results unwritten at the deadline) are known: the reaper returns those.
    await giveBackUnseen();
  }
  return counts;
}

/** A task whose timeout never fits in the budget would wait forever: say so (once). */
function warnUnclaimableTasks(deps: TickDeps, usableMs: number) {
  for (const task of deps.run.registry.values()) {
    if (task.timeoutMs <= usableMs) continue;
    deps.warnOnce(
      `unclaimable:${task.name}:${usableMs}`,
      `task ${task.name} has timeoutMs ${task.timeoutMs}, more than this tick can give (${usableMs} ms = budgetMs − marginMs): its jobs are not claimed here`,
    );
  }
}

/** Resolves to how many jobs it returned to the queue or to DEAD. */
async function reap(sql: Sql, now: Date | null, counts: TickResult): Promise<number> {
  const [row] = await sql.query<{ reaped: number; dead: number }>(reapExpiredLeases({ now, limit: 1000 }));
  const reaped = Number(row?.reaped ?? 0);
  counts.reaped += reaped;
  return reaped;
}
