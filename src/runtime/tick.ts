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
import { statusAfter, type Outcome } from '../core/state.ts';
import { emptyTickResult, type Job, type TickResult } from '../core/types.ts';
import { completeAndClaim, extendLeases, reapExpiredLeases, releaseUnseenClaims, type ResultRow } from '../store/jobs.ts';
import { mapJob } from '../store/rows.ts';
import type { Sql } from '../store/sql.ts';
import type { Logger, WarnOnce } from './log.ts';
import { runJob, type RunDeps, type RunningJob } from './run-job.ts';
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
  /** After an abort, how long a handler has to stop before it is abandoned; at most marginMs / 2, so that its result is written by the deadline. Default 250. */
  abandonAfterMs?: number;
  /** Wait between claims while the queue is empty, in ms. Default 500. */
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
}

export interface TickDeps {
  sql: Sql;
  run: Omit<RunDeps, 'heartbeat' | 'abandonAfterMs'>;
  /** The clock passed into SQL: null means the database's now(). Tests pass instants in. */
  now: () => Date | null;
  /** Fires due schedules, before the first claim and then every fireIntervalMs; returns how many jobs it created. */
  beforeClaim?: () => Promise<number>;
  /** Upkeep run beside the reaper (retention: pruning finished jobs, rate-limited by its owner). */
  housekeeping?: () => Promise<void>;
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
  pollIntervalMs: 500,
  leaseMs: 30_000,
  reapIntervalMs: 10_000,
  fireIntervalMs: 1_000,
  workerName: 'tick',
  drainMs: 10_000,
} as const;

export async function tick(deps: TickDeps, options: TickOptions = {}): Promise<TickResult> {
  const o = { ...TICK_DEFAULTS, ...options };
  const { sql, now } = deps;
  const elapsed = startClock();
  let deadline = o.budgetMs;
  const workerId = `${o.workerName}:${crypto.randomUUID()}`;
  const taskNames = [...deps.run.registry.keys()];
  const counts = emptyTickResult();
  const running = new Map<string, RunningJob>();
  /** Every job this tick claimed and saw; set when a claiming statement failed, so it may hold others. */
  const seen = new Set<string>();
  let claimsUnseen = false;
  /** `progress` and `trace` go into the attempt's history entry (src/store/history.ts). */
  const pending: { job: Job; outcome: Outcome; progress?: { value: unknown }; trace?: string | null }[] = [];
  const wakeup = createWakeup();
  let stopping = false;
  let deadlineReached = false;
  let lastReap = -Infinity;
  let lastFire = -Infinity;
  let queueEmpty = false;
  let failures = 0;

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
    const progress = jobs.map((j) => running.get(j.id)?.progress.pending());
    const rows = await sql.query<{ id: string; cancel_requested: boolean }>(
      extendLeases({
        now: now(),
        workerId,
        jobs: jobs.map((j, i) => ({ id: j.id, attempt: j.attempts, progress: progress[i] && { value: progress[i].value } })),
        leaseMs: o.leaseMs,
        leaseGraceMs: LEASE_GRACE_MS,
      }),
    );
    for (const row of rows) if (row.cancel_requested) running.get(String(row.id))?.stop('cancelled');
    jobs.forEach((j, i) => progress[i] && running.get(j.id)?.progress.written(progress[i].version));
    return new Set(rows.map((r) => String(r.id)));
  };
  const runDeps: RunDeps = {
    ...deps.run,
    abandonAfterMs: Math.min(o.abandonAfterMs, o.marginMs / 2),
    heartbeat: async (job) => (await heartbeat([job])).has(job.id),
  };

  // Renews every running job's lease; any job missing from the answer lost its lease.
  let heartbeating = false;
  const heartbeatTimer = setInterval(async () => {
    if (heartbeating || running.size === 0) return;
    heartbeating = true;
    const jobs = [...running.values()].map((r) => r.job);
    try {
      const held = await heartbeat(jobs);
      for (const job of jobs) if (!held.has(job.id)) running.get(job.id)?.stop('lease-lost');
    } catch (error) {
      deps.log('warn', 'heartbeat failed; leases not extended this time', { error: String(error) });
    } finally {
      heartbeating = false;
    }
  }, Math.max(100, Math.floor(o.leaseMs / 3)));

  const start = (job: Job) => {
    const traced = deps.tracing?.runAttempt(job, () => runJob(job, runDeps));
    const run = traced ?? runJob(job, runDeps);
    running.set(job.id, run);
    seen.add(job.id);
    void run.settled.then((settled) => {
      running.delete(job.id);
      const progress = run.progress.pending();
      const trace = traced?.traceparent ?? null;
      if (settled.kind !== 'lost') pending.push({ job, outcome: settled, trace, ...(progress && { progress: { value: progress.value } }) });
      wakeup.wake();
    });
  };

  const flush = async (limit: number) => {
    const batch = pending.splice(0);
    try {
      const rows = await sql.query(
        completeAndClaim({
          now: now(),
          workerId,
          results: batch.map(({ job, outcome, progress, trace }) => ({ ...toResultRow(job, outcome), progress, trace })),
          limit,
          budgetMs: Math.max(0, Math.floor(deadline - o.marginMs - elapsed())),
          leaseMs: o.leaseMs,
          leaseGraceMs: LEASE_GRACE_MS,
          tasks: taskNames,
        }),
      );
      failures = 0;
      const written = rows.find((row) => row.written !== null && row.written !== undefined)?.written as string[] | undefined;
      tally(counts, batch, new Set(written ?? []), deps.log);
      const claimed = rows.filter((row) => row.id !== null && row.id !== undefined).map(mapJob);
      counts.claimed += claimed.length;
      claimed.forEach(start);
      // A job put back due now was invisible to this statement's claim (one snapshot): look again.
      const requeuedNow = batch.some(({ outcome }) => outcome.kind === 'release' || (outcome.kind === 'retry' && outcome.delayMs === 0));
      if (limit > 0) queueEmpty = claimed.length < limit && !requeuedNow;
    } catch (error) {
      // The write may or may not have landed; writing it again is safe because it is fenced. So
      // may the claim: jobs it took are ours but unseen, and are given back when the tick ends.
      pending.unshift(...batch);
      if (limit > 0) claimsUnseen = true;
      failures += 1;
      deps.log('warn', 'tick statement failed; retrying', { error: String(error), failures });
      await wakeup.sleep(Math.min(100 * 2 ** Math.min(failures, 5), Math.max(0, deadline - elapsed())));
    }
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
      const claiming = !stopping && !deadlineReached;
      if (claiming && deps.beforeClaim && elapsed() - lastFire >= (o.fireIntervalMs || Infinity)) {
        lastFire = elapsed();
        const fired = await deps.beforeClaim().catch((error: unknown) => {
          deps.log('error', 'firing schedules failed', { error: String(error) });
          return 0;
        });
        counts.fired += fired;
        if (fired > 0) queueEmpty = false;
      }
      if (claiming && o.reapIntervalMs > 0 && elapsed() - lastReap >= o.reapIntervalMs) {
        lastReap = elapsed();
        if (await reap(sql, now(), counts).catch((error: unknown) => deps.log('warn', 'reaping failed', { error: String(error) }))) queueEmpty = false;
        await deps.housekeeping?.().catch((error: unknown) => deps.log('warn', 'pruning finished jobs failed', { error: String(error) }));
      }
      const free = claiming ? o.concurrency - running.size : 0;
      if (pending.length > 0 || (free > 0 && !queueEmpty)) {
        await flush(free);
        continue;
      }
      if (running.size === 0 && (!claiming || o.untilIdle)) break;
      // Wait for a handler to finish, for the next poll when slots are free, or for the deadline.
      const untilDeadline = Math.max(0, remaining - (deadlineReached ? 0 : o.marginMs));
      const woke = await wakeup.sleep(free > 0 ? Math.min(o.pollIntervalMs, untilDeadline) : untilDeadline);
      if (!woke) queueEmpty = false;
      // Let handlers that finish in the same moment join one write. setImmediate waits for pending
      // I/O without setTimeout's 1 ms floor, which cost a fifth of each 100-job round trip.
      await yieldToIo();
    }
  } finally {
    clearInterval(heartbeatTimer);
    o.signal?.removeEventListener('abort', onStop);
  }
  if (claimsUnseen) {
    // Jobs still pending (results unwritten at the deadline) are seen too: the reaper returns those.
    const released = await sql
      .query<{ id: string }>(releaseUnseenClaims({ now: now(), workerId, known: [...seen] }))
      .catch((error: unknown) => (deps.log('warn', 'giving back unseen claims failed; the reaper will return them', { error: String(error) }), []));
    if (released.length > 0) deps.log('warn', 'gave back jobs claimed by a statement whose answer was lost', { jobs: released.map((r) => String(r.id)) });
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

function toResultRow(job: Job, outcome: Outcome): ResultRow {
  return {
    id: job.id,
    attempt: job.attempts,
    status: statusAfter(outcome) as ResultRow['status'],
    result: outcome.kind === 'done' ? outcome.result : null,
    error: outcome.kind === 'done' ? null : outcome.error,
    delay_ms: outcome.kind === 'retry' ? outcome.delayMs : 0,
    release: outcome.kind === 'release',
    state: outcome.kind === 'done' ? outcome.state : undefined,
  };
}

function tally(counts: TickResult, batch: readonly { job: Job; outcome: Outcome }[], written: Set<string>, log: TickDeps['log']) {
  const stale: string[] = [];
  for (const { job, outcome } of batch) {
    if (!written.has(job.id)) {
      stale.push(job.id);
      continue;
    }
    if (outcome.kind === 'done') counts.done += 1;
    else if (outcome.kind === 'dead') counts.dead += 1;
    else if (outcome.kind === 'cancelled') counts.cancelled += 1;
    else counts.retried += 1;
  }
  if (stale.length > 0) {
    counts.staleWrites += stale.length;
    log('warn', 'stale result writes ignored: another worker owns these jobs now', { jobs: stale });
  }
}

const yieldToIo: () => Promise<void> =
  typeof setImmediate === 'function' ? () => new Promise((resolve) => setImmediate(resolve)) : () => new Promise((resolve) => setTimeout(resolve, 0));

/** Milliseconds since the tick started, from a monotonic clock (never compared with the database's). */
function startClock(): () => number {
  const t0 = performance.now();
  return () => performance.now() - t0;
}

/** A sleep that a finishing handler can cut short. `sleep` resolves true when woken early. */
function createWakeup() {
  let wake: () => void = () => {};
  return {
    wake: () => wake(),
    sleep(ms: number): Promise<boolean> {
      return new Promise((resolve) => {
        const timer = setTimeout(() => resolve(false), ms);
        wake = () => {
          clearTimeout(timer);
          wake = () => {};
          resolve(true);
        };
      });
    },
  };
}
