/**
 * Waiting for a job's result: polling its row by primary key, 50 ms at first and then backing off
 * to 500 ms, until it finishes or the wait's bound passes. No LISTEN/NOTIFY, no session: it works
 * over Neon's HTTP driver. The bound is kept even when a read hangs: a read still out when it
 * passes is abandoned, and the job is answered as last seen.
 */
import { SkiplockError } from '../../core/errors.ts';
import type { Job, JobStatus } from '../../core/types.ts';

export const WAIT_POLL = { firstMs: 50, maxMs: 500, factor: 1.5 } as const;

/** The longest wait the library accepts (the HTTP API has its own, shorter bound). */
export const MAX_WAIT_MS = 24 * 3600 * 1000;

const FINISHED: readonly JobStatus[] = ['DONE', 'DEAD', 'CANCELLED'];

export function isFinished(job: Job): boolean {
  return FINISHED.includes(job.status);
}

export interface WaitResult {
  /** The job as last read: finished, or still QUEUED / RUNNING when the wait ran out. */
  job: Job;
  /** True when the job is DONE, DEAD or CANCELLED. */
  finished: boolean;
}

export interface WaitDeps {
  /** Reads the job by its id; undefined when it is gone. */
  read(): Promise<Job | undefined>;
  /** Milliseconds from a monotonic clock. Default performance.now. */
  elapsed?: () => number;
  /** Resolves after `ms`, or at once when `signal` aborts. Default setTimeout. */
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
}

/** Checks a wait's length: a number of ms from 0 to `max`. */
export function checkWaitMs(timeoutMs: unknown, max = MAX_WAIT_MS): number {
  if (typeof timeoutMs !== 'number' || !Number.isFinite(timeoutMs) || timeoutMs < 0 || timeoutMs > max)
    throw new SkiplockError('invalid_request', `timeoutMs must be a number of ms from 0 to ${max}`, [{ path: ['timeoutMs'], message: 'out of range' }]);
  return timeoutMs;
}

const TIMED_OUT: unique symbol = Symbol('timed out');

/** Waits at most `timeoutMs` for `job` to finish. */
export async function waitForJob(job: Job, timeoutMs: number, deps: WaitDeps): Promise<WaitResult> {
  const elapsed = deps.elapsed ?? (() => performance.now());
  const sleep = deps.sleep ?? defaultSleep;
  const deadline = elapsed() + timeoutMs;
  let last = job;
  let delay: number = WAIT_POLL.firstMs;
  while (!isFinished(last)) {
    if (deadline - elapsed() <= 0) break;
    await sleep(Math.min(delay, deadline - elapsed()));
    delay = Math.min(delay * WAIT_POLL.factor, WAIT_POLL.maxMs);
    const left = deadline - elapsed();
    if (left <= 0) break;
    const read = deps.read().catch(() => last); // a failed read is retried at the next poll
    const bound = new AbortController();
    const now = await Promise.race([read, sleep(left, bound.signal).then((): typeof TIMED_OUT => TIMED_OUT)]);
    bound.abort();
    if (now === TIMED_OUT || now === undefined) break;
    last = now;
  }
  return { job: last, finished: isFinished(last) };
}

function defaultSleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener('abort', () => (clearTimeout(timer), resolve()), { once: true });
  });
}
