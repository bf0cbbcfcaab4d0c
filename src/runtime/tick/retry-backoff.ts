/**
 * How soon a failed statement of the tick loop is tried again: 100 ms, doubling, with jitter, up to
 * 1 s while the connection is lost (nothing reaches the database, and it should be used the
 * moment it accepts connections again: a PostgreSQL restart) and up to 5 s when the database
 * answered with an error (a statement it refuses must not be sent hundreds of times a second).
 * The count starts again after a statement succeeds. Pure: the caller sleeps.
 */
import { isConnectionLost } from '../../store/sql.ts';

export const RETRY_BACKOFF = {
  /** The ceiling of the first wait. */
  firstMs: 100,
  /** The most a wait grows to while the connection is lost. */
  connectionLostMaxMs: 1_000,
  /** The most a wait grows to after any other failure. */
  maxMs: 5_000,
} as const;

/** A schedule of waits: RETRY_BACKOFF's, or a caller's own (the Durable Object's alarm waits longer: each try is an invocation). */
export interface RetryBackoff {
  firstMs: number;
  connectionLostMaxMs: number;
  maxMs: number;
}

/**
 * The wait after the `failures`-th failure in a row (1, 2, …): a ceiling of firstMs·2^(failures−1),
 * capped, and a wait drawn between half the ceiling and the ceiling ("equal jitter": processes that
 * failed together do not retry together, and the wait still grows).
 */
export function retryDelayMs(failures: number, error: unknown, random: () => number = Math.random, backoff: RetryBackoff = RETRY_BACKOFF): number {
  const { min, max } = retryDelayRange(failures, error, backoff);
  return Math.round(min + random() * (max - min));
}

/** The range retryDelayMs draws from. */
export function retryDelayRange(failures: number, error: unknown, backoff: RetryBackoff = RETRY_BACKOFF): { min: number; max: number } {
  const cap = isConnectionLost(error) ? backoff.connectionLostMaxMs : backoff.maxMs;
  const max = Math.min(cap, backoff.firstMs * 2 ** Math.min(Math.max(1, failures) - 1, 20));
  return { min: max / 2, max };
}
