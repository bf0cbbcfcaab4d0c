/**
 * The tick's "flush + claim" phase: finished results written and free slots claimed in one
 * statement (completeAndClaim), the claimed jobs handed to the run phase; and what happens when
 * that statement fails — a refusal isolates the bad row, any other failure backs off, and jobs a
 * lost answer may have claimed are given back before anything else is claimed.
 */
import type { Outcome } from '../../core/state.ts';
import { released } from '../../core/state.ts';
import { describeError } from '../../core/errors.ts';
import { storableText } from '../../core/json.ts';
import type { Job } from '../../core/types.ts';
import { completeAndClaim } from '../../store/claim.ts';
import type { RegisteredTaskRow } from '../../store/event-subscriptions.ts';
import { releaseUnseenClaims } from '../../store/leases.ts';
import { mapClaimedJob, toBool } from '../../store/rows.ts';
import type { Row } from '../../store/sql.ts';
import { retryDelayMs } from './retry-backoff.ts';
import { loadSteps, type StoredStep } from '../steps/steps.ts';
import { asIds, isRefusal, takeBatch, tally, toResultRow, type PendingResult } from './results.ts';
import { knownJobIds, LEASE_GRACE_MS, leaseProbeDue, startBatches, startJob, type TickRun } from './run.ts';

/** Writes a batch of pending results and claims up to `free` jobs, which start at once. */
export async function flushAndClaim(run: TickRun, free: number): Promise<void> {
  const { deps, o, pending } = run;
  // A result that failed to write alone is retried alone, without a claim (see onWriteRefused).
  const isolated = pending[0]?.suspect === true;
  const batch = isolated ? pending.splice(0, 1) : takeBatch(pending);
  const limit = isolated ? 0 : free;
  const token = limit > 0 ? `${run.workerId}#${(run.claimNumber += 1)}` : run.workerId;
  const probeLeases = leaseProbeDue(run);
  const register = deps.registration?.needed() ? deps.registration.rows : null;
  run.statements += 1;
  let rows: Row[];
  try {
    rows = await deps.sql.query(claimStatement(run, batch, limit, token, probeLeases, register));
  } catch (error) {
    return onStatementFailed(run, batch, isolated, limit, error);
  }
  run.failures = 0;
  if (register) deps.registration!.done();
  readSummary(run, batch, rows, probeLeases);
  const claimedRows = rows.filter((row) => row.id !== null && row.id !== undefined);
  const claimed = claimedRows.map((row) => mapClaimedJob(row, token));
  run.counts.claimed += claimed.length;
  // A statement that did work is not idle cost: only the statements since the last one that wrote
  // or claimed something stretch the next idle wait (waitPhase). Counting a busy spell's would make
  // the poll after it wait one interval per statement of the spell.
  if (batch.length > 0 || claimed.length > 0) run.statements = 0;
  // A batch task's jobs claimed together are one call (src/runtime/tick/run-batch.ts), one slot.
  const { singles, calls } = startBatches(run, claimed, claimedRows.map((row) => row.batch_group));
  // Every slot filled: more may be due than this tick can run (maxParallelTicks starts more).
  if (limit > 0 && limit >= o.concurrency && calls === limit) o.onBacklog?.();
  if (singles.some((job) => job.stepCount > 0)) await startDurable(run, singles);
  else singles.forEach((job) => startJob(run, job));
  const requeuedNow = batch.some(requeuesNow);
  if (limit > 0) run.queueEmpty = calls < limit && !requeuedNow;
  else if (isolated && requeuedNow) run.queueEmpty = false;
}

/** The one statement of the phase (completeAndClaim): the batch's results, the claim, and the probes due. */
function claimStatement(run: TickRun, batch: readonly PendingResult[], limit: number, token: string, probeLeases: boolean, register: readonly RegisteredTaskRow[] | null) {
  const { deps, o } = run;
  return completeAndClaim({
    now: deps.now(),
    workerId: token,
    results: batch.map(({ job, outcome, progress, trace }) => ({ ...toResultRow(job, outcome), progress, trace })),
    limit,
    budgetMs: Math.max(0, Math.floor(run.deadline - o.marginMs - run.elapsed())),
    leaseMs: o.leaseMs,
    leaseGraceMs: LEASE_GRACE_MS,
    tasks: run.taskNames,
    staticSchedules: run.probeSchedules ? deps.staticSchedules : null,
    flowLimits: run.limits,
    batches: run.batches,
    unbatched: probeLeases ? run.unbatched : null,
    fanIn: batch.some(({ job }) => job.parentId !== null),
    probeLeases,
    register,
    subscriptions: probeLeases ? (deps.events?.subscriptions ?? null) : null,
  });
}

/** The statement failed: a refusal isolates the bad row; anything else puts the batch back and backs off. */
function onStatementFailed(run: TickRun, batch: PendingResult[], isolated: boolean, limit: number, error: unknown): void | Promise<void> {
  // (With no result to blame, a refusal is the claim's: backed off below like any failure.)
  if (isRefusal(error) && batch.length > 0) return onWriteRefused(run, batch, isolated, error);
  // The write may or may not have landed; writing it again is safe because it is fenced. So
  // may the claim: jobs it took are ours but unseen, given back before anything else is claimed.
  run.pending.unshift(...batch);
  if (limit > 0) run.claimsUnseen = run.claimEverLost = true;
  return backOff(run, error, 'tick statement failed; retrying');
}

/** The statement's summary row: the results it wrote or found cancelled, and the probes' answers. */
function readSummary(run: TickRun, batch: readonly PendingResult[], rows: readonly Row[], probeLeases: boolean): void {
  const { deps } = run;
  const summary = rows.find((row) => row.written !== null && row.written !== undefined);
  tally(run.counts, batch, new Set(asIds(summary?.written)), new Set(asIds(summary?.cancelled)), deps.log);
  if (run.probeSchedules && summary) run.scheduleDue = toBool(summary.schedule_due);
  if (probeLeases && deps.events && summary) run.eventsDue = toBool(summary.events_due);
  if (probeLeases && summary) {
    run.lastLeaseProbe = run.elapsed();
    run.reapDue = toBool(summary.reap_due);
    run.strandedDue = toBool(summary.stranded_due);
  }
}

/**
 * A result that put its job back due now: the statement's claim did not take it, as a statement
 * updates a row once (the claim functions read fresh snapshots, not the statement's one; migration
 * 015): look again. So may a parent a child's end woke (the fan-in), or one whose children had all
 * ended (wait).
 */
function requeuesNow({ job, outcome }: PendingResult): boolean {
  return outcome.kind === 'release' || outcome.kind === 'wait' || job.parentId !== null || (outcome.kind === 'suspend' && outcome.runAt === null) || (outcome.kind === 'retry' && outcome.delayMs === 0);
}

/**
 * Claimed jobs with durable steps: their recorded steps are read first (one statement for the
 * batch). If that read fails, those jobs are released (due now, the attempt given back).
 */
async function startDurable(run: TickRun, claimed: readonly Job[]): Promise<void> {
  let steps: Map<string, StoredStep[]>;
  try {
    steps = await loadSteps(run.deps.sql, run.deps.now(), claimed);
  } catch (error) {
    run.deps.log('warn', 'reading the steps of claimed jobs failed; releasing them', { error: String(error) });
    for (const job of claimed) {
      if (job.stepCount > 0) run.pending.push({ job, outcome: released('their steps could not be read') });
      else startJob(run, job);
    }
    return;
  }
  for (const job of claimed) startJob(run, job, steps.get(job.id) ?? []);
}

/**
 * The database refused the statement for what it carries (a data or constraint error), so
 * sending it again would fail again. Several results: each is written alone from now on, so
 * one bad row cannot hold back the others. One result written alone: it is the bad row; it is
 * written as DEAD without its result, saying why; if even that is refused, it is left to the
 * reaper.
 */
function onWriteRefused(run: TickRun, batch: PendingResult[], isolated: boolean, error: unknown): void {
  const { deps, pending } = run;
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
}

/** Gives back the jobs a claim whose answer was lost took (see releaseUnseenClaims); resolves to `{ failed }` if it failed. */
export async function giveBackUnseen(run: TickRun): Promise<{ failed: unknown } | null> {
  run.statements += 1;
  try {
    const released = await run.deps.sql.query<{ id: string }>(releaseUnseenClaims({ now: run.deps.now(), workerId: run.workerId, known: knownJobIds(run) }));
    if (released.length > 0) run.deps.log('warn', 'gave back jobs claimed by a statement whose answer was lost', { jobs: released.map((r) => String(r.id)) });
    return null;
  } catch (error) {
    return { failed: error };
  }
}

/**
 * After a failed statement of the loop: logged with how many failed in a row and the wait, then
 * the wait of src/runtime/tick/retry-backoff.ts (100 ms doubling, jittered, to 1 s while the connection
 * is lost, to 5 s otherwise), never past the deadline. A statement that succeeds resets the count.
 */
export async function backOff(run: TickRun, error: unknown, message: string): Promise<void> {
  run.failures += 1;
  const retryInMs = retryDelayMs(run.failures, error);
  run.deps.log('warn', message, { error: String(error), failures: run.failures, retryInMs });
  await run.wakeup.sleep(Math.min(retryInMs, Math.max(0, run.deadline - run.elapsed())));
}
