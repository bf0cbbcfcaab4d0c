/**
 * One tick: what every invocation (cron, alarm, HTTP request, Node timer) runs, as a short loop
 * over named phases, each reading and changing the tick's state (TickRun, tick-run.ts):
 *
 *   fire ...... due schedules (at the start, then at most every fireIntervalMs, when a claim said one is due)
 *   reap ...... expired leases, when a claim saw one (claims ask at the start and every reapIntervalMs); keying and pruning on that interval
 *   dispatch .. `on:` jobs other senders left pending for this deployment, when a claim saw some (events_due)
 *   flush ..... finished results written + free slots claimed, one statement (completeAndClaim, tick-flush.ts)
 *   run ....... claimed jobs' handlers, each under its own AbortSignal; heartbeats keep their leases (tick-run.ts)
 *   wait ...... for a handler to finish, the next poll, or the deadline
 *
 * until the deadline, or until idle when asked. Results that finish together are written together,
 * and the same round trip claims the next jobs, so a busy tick costs one statement per batch. The
 * wake state is the tick's input and output one level up (skiplock.tickIfDue, wake.ts): read
 * before, and written after from the database's answer to "when is anything next due".
 */
import type { Sql } from '../../store/sql.ts';
import type { TickResult } from '../../core/types.ts';
import { reapExpiredLeases } from '../../store/leases.ts';
import { adoptUnkeyedJobs } from '../flow/keys.ts';
import { backOff, flushAndClaim, giveBackUnseen } from './flush.ts';
import { TICK_DEFAULTS, type TickDeps, type TickOptions } from './options.ts';
import { affordableClaims, openTickRun, runningCalls, startHeartbeats, stopTickRun, upkeepAffordable, upkeepDue, type TickRun } from './run.ts';
import { yieldToIo } from './timing.ts';
import { ADOPT_BATCH_LIMIT, adoptStrandedBatchJobs } from './run-batch.ts';

export { TICK_DEFAULTS, type TickDeps, type TickOptions } from './options.ts';

export async function tick(deps: TickDeps, options: TickOptions = {}): Promise<TickResult> {
  const run = openTickRun(deps, { ...TICK_DEFAULTS, ...options });
  const onStop = () => stopTickRun(run);
  warnUnclaimableTasks(deps, run.o.budgetMs - run.o.marginMs);
  if (run.o.signal?.aborted) onStop();
  run.o.signal?.addEventListener('abort', onStop, { once: true });
  const stopHeartbeats = startHeartbeats(run);
  try {
    for (;;) {
      if (!checkDeadline(run)) break;
      // Jobs a lost answer claimed come first: nothing more is claimed while they are outstanding.
      if (run.claimsUnseen) {
        if (run.deadline - run.elapsed() <= 0) break;
        await giveBackPhase(run);
        continue;
      }
      const claiming = !run.stopping && !run.deadlineReached && !run.outOfSubrequests;
      if (claiming) {
        await firePhase(run);
        await reapPhase(run);
        await dispatchPhase(run);
      }
      const free = claiming ? claimable(run) : 0;
      if (run.pending.length > 0 || (free > 0 && !run.queueEmpty)) {
        await flushAndClaim(run, free); // and the run phase: claimed jobs start at once
        continue;
      }
      if (run.running.size === 0 && (!claiming || run.o.untilIdle || run.outOfSubrequests)) break;
      await waitPhase(run, free);
    }
  } finally {
    stopHeartbeats();
    run.o.signal?.removeEventListener('abort', onStop);
  }
  // Once more at the end: a lost statement may have committed after the give-back above. Jobs
  // still pending (results unwritten at the deadline) are known: the reaper returns those.
  if (run.claimEverLost) {
    const giveBack = await giveBackUnseen(run);
    if (giveBack) run.deps.log('warn', 'giving back unseen claims failed; the reaper returns them when their leases expire', { error: String(giveBack.failed) });
  }
  return run.counts;
}

/**
 * Free slots, within the subrequest budget. With nothing held and no room for even one job's
 * claim and result, the tick stops claiming (its conclusion says the rest is due: the next
 * invocation takes it); with jobs held, it waits for their results to free their share.
 */
function claimable(run: TickRun): number {
  const slots = run.o.concurrency - runningCalls(run);
  if (slots <= 0) return 0;
  const affordable = affordableClaims(run);
  if (affordable > 0) return Math.min(slots, affordable);
  if (run.running.size === 0 && run.pending.length === 0) {
    run.outOfSubrequests = true;
    run.deps.warnOnce(
      `subrequests:${run.o.subrequestLimit}`,
      `a tick reached its subrequest budget (subrequestLimit ${run.o.subrequestLimit}) and claimed no more; the next invocation takes what is due (said once)`,
    );
  }
  return 0;
}

/** False when the tick must end now (results unwritten past the deadline); aborts handlers at the margin. */
function checkDeadline(run: TickRun): boolean {
  const remaining = run.deadline - run.elapsed();
  if (remaining <= 0 && run.pending.length > 0) {
    run.deps.log('error', 'deadline passed with results unwritten; the reaper will return these jobs', { jobs: run.pending.map((p) => p.job.id) });
    return false;
  }
  if (remaining <= run.o.marginMs && !run.deadlineReached) {
    run.deadlineReached = true;
    for (const handle of run.running.values()) handle.stop(run.stopping ? 'shutdown' : 'deadline');
  }
  return true;
}

async function giveBackPhase(run: TickRun): Promise<void> {
  const giveBack = await giveBackUnseen(run);
  if (giveBack) return backOff(run, giveBack.failed, 'giving back unseen claims failed; retrying');
  run.claimsUnseen = false;
  run.failures = 0;
  run.queueEmpty = false;
}

/** Fires due schedules: at the start, then when a claiming statement said one is due, at most every fireIntervalMs. */
async function firePhase(run: TickRun): Promise<void> {
  const { deps, o } = run;
  if (!deps.beforeClaim || !run.scheduleDue || run.elapsed() - run.lastFire < (o.fireIntervalMs || Infinity) || !upkeepAffordable(run, 2)) return;
  run.lastFire = run.elapsed();
  if (run.probeSchedules) run.scheduleDue = false; // until a claiming statement says so again
  run.statements += 2; // at most: the read, and the firing when something was due
  run.subrequests.spent += 2; // not through the tick's port (the schedules' own)
  const fired = await deps.beforeClaim().catch((error: unknown) => {
    deps.log('error', 'firing schedules failed', { error: String(error) });
    return 0;
  });
  run.counts.fired += fired;
  if (fired > 0) run.queueEmpty = false;
}

/**
 * Starts the `on:` jobs that senders without the task left pending for this deployment, when a
 * claiming statement said there are (events_due): a read, and one statement that starts them
 * (src/runtime/events/events.ts dispatchPendingWith). A full batch looks again at once.
 */
async function dispatchPhase(run: TickRun): Promise<void> {
  const { deps } = run;
  if (!deps.events || !run.eventsDue || !upkeepAffordable(run, 2)) return;
  run.eventsDue = false; // until a claiming statement says so again
  run.statements += 2; // at most: the read, and the dispatch when something was pending
  run.subrequests.spent += 2; // not through the tick's port
  const dispatched = await deps.events.dispatch().catch((error: unknown) => {
    deps.log('warn', 'starting the on: jobs of events sent elsewhere failed', { error: String(error) });
    return { started: 0, more: false };
  });
  if (dispatched.started > 0) run.queueEmpty = false;
  if (dispatched.more) run.eventsDue = true;
}

/**
 * Reaps expired leases when a claiming statement saw one (it asks at the start and then every
 * reapIntervalMs: leaseProbeDue; no reaper statement while none has expired, which is nearly
 * always); and on that interval, from the start, keys unkeyed jobs of limited tasks and prunes.
 */
async function reapPhase(run: TickRun): Promise<void> {
  const { deps } = run;
  if (run.reapDue && upkeepAffordable(run, 1)) {
    run.reapDue = false; // until a claiming statement says so again
    run.statements += 1;
    if (await reap(deps.sql, deps.now(), run.counts).catch((error: unknown) => deps.log('warn', 'reaping failed', { error: String(error) }))) run.queueEmpty = false;
  }
  if (run.strandedDue && upkeepAffordable(run, 1)) await adoptStrandedPhase(run);
  if (!upkeepDue(run, run.lastUpkeep) || !upkeepAffordable(run, 3)) return;
  run.lastUpkeep = run.elapsed();
  // Jobs of limited tasks enqueued without their keys: keyed here, or no claim would take them.
  const adopted = run.limits.length === 0 ? 0 : await adoptUnkeyedJobs(deps.sql, deps.run.registry, deps.now()).catch((error: unknown) => {
    deps.log('warn', 'keying jobs of limited tasks failed', { error: String(error) });
    return 0;
  });
  if (adopted > 0) run.queueEmpty = false;
  const pruned = await deps.housekeeping?.().catch((error: unknown) => deps.log('warn', 'pruning finished jobs failed', { error: String(error) }));
  if (pruned === true) {
    run.statements += 1;
    run.subrequests.spent += 1; // pruning goes through skiplock's own port
  }
}

/** Jobs left with a batch key by a task that is no batch task here (a claim's probe saw some): cleared, or no claim takes them. */
async function adoptStrandedPhase(run: TickRun): Promise<void> {
  const { deps } = run;
  run.strandedDue = false; // until a claiming statement says so again
  run.statements += 1;
  const cleared = await adoptStrandedBatchJobs(deps.sql, run.unbatched).catch((error: unknown) => {
    deps.log('warn', 'clearing the batch keys of jobs of tasks without batch failed', { error: String(error) });
    return 0;
  });
  if (cleared > 0) run.queueEmpty = false;
  if (cleared >= ADOPT_BATCH_LIMIT) run.strandedDue = true;
}

/**
 * Waits for a handler to finish, for the next poll when slots are free, or for the deadline.
 * Idle, a poll that took k statements that found no work waits k polls: at most one statement per
 * pollIntervalMs (a statement that wrote or claimed something does not count: tick-flush.ts).
 */
async function waitPhase(run: TickRun, free: number): Promise<void> {
  const { o } = run;
  const remaining = run.deadline - run.elapsed();
  const untilDeadline = Math.max(0, remaining - (run.deadlineReached ? 0 : o.marginMs));
  const poll = o.pollIntervalMs * Math.max(1, run.running.size === 0 ? run.statements : 1);
  run.statements = 0;
  const woke = await run.wakeup.sleep(free > 0 ? Math.min(poll, untilDeadline) : untilDeadline);
  // Time to poll again, unless the reaper is due: then its statement is this poll's (it says
  // whether it returned jobs; if so, they are claimed at once).
  if (!woke && !run.reapDue) run.queueEmpty = false;
  // Let handlers that finish in the same moment join one write. setImmediate waits for pending
  // I/O without setTimeout's 1 ms floor, which cost a fifth of each 100-job round trip.
  await yieldToIo();
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
