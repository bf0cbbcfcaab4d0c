/**
 * The job state machine, in one place.
 *
 *   QUEUED ──claim──▶ RUNNING ──done──────▶ DONE
 *     ▲  │              │ ├────retry───────▶ QUEUED (run_at = now + backoff)
 *     │  │              │ ├────dead────────▶ DEAD   (permanent error, bad payload, unknown task,
 *     │  │              │ │                           or attempts exhausted)
 *     │  │              │ ├────cancelled───▶ CANCELLED (a cancel was requested while it ran)
 *     │  │              │ ├────release─────▶ QUEUED (stopped by the worker at its deadline or
 *     │  │              │ │                           shutdown; the attempt is given back)
 *     │  │              │ └────lease expired (reaper) ▶ QUEUED, or DEAD when attempts are exhausted
 *     │  │              │ ├────suspend─────▶ WAITING (ctx.sleep: run_at = wake time, the attempt
 *     │  │              │ │                           given back); a yield between steps: QUEUED, due now
 *     │  │              │ └────wait────────▶ WAITING (ctx.invoke: until its children end;
 *     │  │              │                              ctx.waitForEvent/waitForCallback: until the
 *     │  │              │                              wait completes, run_at = its timeout or none;
 *     │  │              │                              QUEUED at once when it was already over)
 *     │  │            WAITING ──its wake instant comes──▶ RUNNING (claimed like a due QUEUED job:
 *     │  │              │                                 the sleep's end, a wait's timeout)
 *     │  │              ├──last child ends (fan-in), or its event/callback arrives──▶ QUEUED (due now)
 *     │  │              └──cancel (by a person)──▶ CANCELLED, with its QUEUED/WAITING descendants
 *     │  └──cancel──▶ CANCELLED
 *     └──────retry (by a person)──── DEAD | CANCELLED
 *            (and DEAD ──a failed child of it, retried by a person, ends DONE──▶ QUEUED)
 *     (restart from a step, by a person: DEAD | CANCELLED ──▶ QUEUED; its recorded steps from that
 *      one on are forgotten: src/store/restart.ts. Never a live job: see RESTARTABLE_STATUSES)
 *
 * A live job (QUEUED, RUNNING, WAITING) is a row of skiplock.queue; a job that ended is its record
 * only (skiplock.job_record, migration 021): the arrows into DONE, DEAD and CANCELLED delete the
 * queue row and write the record in the same statement, and the arrows out of them insert it again.
 *
 * Every arrow is one SQL statement in src/store: the enqueue in enqueue.ts, the claim and the
 * result in claim.ts, the reaper in leases.ts, those a person takes (cancel and retry) in admin.ts;
 * the fan-in, WAITING → QUEUED, is a fragment of every statement that ends a child (steps.ts).
 * The arrows out of RUNNING are fenced: they apply only where locked_by and attempts still match
 * the worker that claimed the job.
 */
import type { Backoff } from './backoff.ts';
import { retryDelay } from './backoff.ts';
import { describeError, isPermanent } from './errors.ts';
import { storableText } from './json.ts';
import type { JobStatus } from './types.ts';

/** Every arrow above; test/runtime/transitions.test.ts checks that the SQL takes exactly these. */
export const TRANSITIONS: Readonly<Record<JobStatus, readonly JobStatus[]>> = {
  QUEUED: ['RUNNING', 'CANCELLED'],
  RUNNING: ['DONE', 'QUEUED', 'WAITING', 'DEAD', 'CANCELLED'],
  // Durable steps (issue 15, migration 012): a parent waiting for the children it invoked; since
  // migration 021 also a sleep or a wait, claimed when its wake instant comes.
  WAITING: ['RUNNING', 'QUEUED', 'CANCELLED'],
  DONE: [],
  DEAD: ['QUEUED'],
  CANCELLED: ['QUEUED'],
};

/**
 * The states a restart from a step takes (src/store/restart.ts): a job that ended without success,
 * like a retry. Never a live one (QUEUED, WAITING, RUNNING): a restarted job is QUEUED, so the same
 * restart sent again (a client retrying, a bulk call repeated) finds nothing to restart instead of
 * forgetting and re-running steps the first one already ran again (issue 30). To restart a live
 * job, a person cancels it first.
 */
export const RESTARTABLE_STATUSES: readonly JobStatus[] = ['DEAD', 'CANCELLED'];

/** How a run ended, as the result write records it. */
export type Outcome =
  /** `state`: a schedule's recurring state replaced by the run, written with the result. */
  | { kind: 'done'; result: unknown; state?: { value: unknown } }
  | { kind: 'retry'; error: string; delayMs: number }
  | { kind: 'dead'; error: string }
  | { kind: 'cancelled'; error: string }
  /** Stopped by the worker (deadline, shutdown) and put back due now, without spending the attempt. */
  | { kind: 'release'; error: string }
  /**
   * Durable steps (src/runtime/steps/steps.ts): the handler left the invocation on its own — a sleep
   * (WAITING until `runAt`, database time as ISO text: the result write decides it) or a yield between steps near the deadline
   * (`runAt` null: due now). The attempt is given back; last_error is kept.
   */
  | { kind: 'suspend'; runAt: string | null }
  /**
   * ctx.invoke: WAITING until the children end (QUEUED at once if they all have). ctx.waitForEvent
   * and waitForCallback (`events`): WAITING until the wait completes, or with a timeout QUEUED
   * until `runAt` (database time as ISO text), like a sleep. The attempt is given back.
   */
  | { kind: 'wait'; runAt?: string | null; events?: boolean };

export function done(result: unknown, state?: { value: unknown }): Outcome {
  return { kind: 'done', result: result === undefined ? null : result, ...(state && { state }) };
}

export function dead(error: unknown): Outcome {
  return { kind: 'dead', error: describeError(error) };
}

export function released(reason: string): Outcome {
  return { kind: 'release', error: reason };
}

export function cancelled(): Outcome {
  return { kind: 'cancelled', error: 'cancelled while running' };
}

/**
 * A failed attempt: retried with backoff while attempts remain and the error is transient;
 * DEAD when the error is permanent or this was the last attempt.
 */
export function failed(
  job: { attempts: number; maxAttempts: number },
  error: unknown,
  backoff?: Backoff,
  random?: () => number,
): Outcome {
  if (isPermanent(error) || job.attempts >= job.maxAttempts) return dead(error);
  const { delayMs, problem } = retryDelay(job.attempts, backoff, random);
  const described = describeError(error);
  // Said where a person looks (last_error): the job still retries, on the default schedule.
  const note = problem === undefined ? '' : ` (the task's backoff failed: ${problem}; the default backoff was used)`;
  return { kind: 'retry', error: storableText(described + note), delayMs };
}

export function statusAfter(outcome: Outcome): JobStatus {
  switch (outcome.kind) {
    case 'done':
      return 'DONE';
    case 'retry':
    case 'release':
    case 'suspend':
      return 'QUEUED';
    case 'wait':
      return 'WAITING';
    case 'dead':
      return 'DEAD';
    case 'cancelled':
      return 'CANCELLED';
  }
}
