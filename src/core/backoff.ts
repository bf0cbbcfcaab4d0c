export interface BackoffOptions {
  /** Delay before the first retry, in ms. Default 10 000 (10 s). */
  baseMs?: number;
  /** Upper bound of any delay, in ms. Default 3 600 000 (1 h). */
  maxMs?: number;
  /**
   * Fraction of the delay taken off at random, so that jobs that failed together do not retry
   * together. 0 ≤ jitter ≤ 1. Default 0.25: each delay lies in [0.75·d, d].
   */
  jitter?: number;
}

/** Either exponential-backoff options or a function of the attempt that just failed (1-based). */
export type Backoff = BackoffOptions | ((attempt: number) => number);

export const DEFAULT_BACKOFF = { baseMs: 10_000, maxMs: 3_600_000, jitter: 0.25 } as const;

/**
 * Delay before the next attempt, after `attempt` (1-based) failed:
 * d = min(maxMs, baseMs · 2^(attempt−1)), then jittered down into [d·(1−jitter), d].
 */
export function backoffDelayMs(attempt: number, backoff: Backoff = {}, random: () => number = Math.random): number {
  if (typeof backoff === 'function') return Math.max(0, Math.round(backoff(attempt)));
  const baseMs = backoff.baseMs ?? DEFAULT_BACKOFF.baseMs;
  const maxMs = backoff.maxMs ?? DEFAULT_BACKOFF.maxMs;
  const jitter = Math.min(1, Math.max(0, backoff.jitter ?? DEFAULT_BACKOFF.jitter));
  const exponent = Math.min(Math.max(attempt - 1, 0), 60);
  const delay = Math.min(maxMs, baseMs * 2 ** exponent);
  return Math.round(delay * (1 - jitter * random()));
}
