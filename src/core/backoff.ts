export interface BackoffOptions {
  /** Delay before the first retry, in ms. Default 10 000 (10 s). */
  baseMs?: number;
  /** Upper bound of any delay, in ms (at most MAX_BACKOFF_MS). Default 3 600 000 (1 h). */
  maxMs?: number;
  /**
   * Fraction of the delay taken off at random, so that jobs that failed together do not retry
   * together. 0 ≤ jitter ≤ 1. Default 0.25: each delay lies in [0.75·d, d].
   */
  jitter?: number;
}

/**
 * Either exponential-backoff options or a function of the attempt that just failed (1-based),
 * returning a delay in ms. A function that throws or returns anything but a finite number gets
 * the default backoff for that attempt instead; a finite delay is clamped to 0…MAX_BACKOFF_MS.
 */
export type Backoff = BackoffOptions | ((attempt: number) => number);

export const DEFAULT_BACKOFF = { baseMs: 10_000, maxMs: 3_600_000, jitter: 0.25 } as const;

/** The longest retry delay skiplock stores: 365 days. */
export const MAX_BACKOFF_MS = 365 * 24 * 3600 * 1000;

/** A delay, and why the task's own backoff could not give it (the default was used then). */
export interface RetryDelay {
  delayMs: number;
  problem?: string;
}

/**
 * Delay before the next attempt, after `attempt` (1-based) failed:
 * d = min(maxMs, baseMs · 2^(attempt−1)), then jittered down into [d·(1−jitter), d].
 * Never throws; always a finite integer in 0…MAX_BACKOFF_MS.
 */
export function backoffDelayMs(attempt: number, backoff: Backoff = {}, random: () => number = Math.random): number {
  return retryDelay(attempt, backoff, random).delayMs;
}

/** backoffDelayMs, saying so when a backoff function failed and the default stood in for it. */
export function retryDelay(attempt: number, backoff: Backoff = {}, random: () => number = Math.random): RetryDelay {
  if (typeof backoff !== 'function') return { delayMs: exponential(attempt, backoff, random) };
  let value: unknown;
  try {
    value = backoff(attempt);
  } catch (error) {
    return { delayMs: exponential(attempt, {}, random), problem: `it threw ${describeThrown(error)}` };
  }
  if (typeof value !== 'number' || !Number.isFinite(value)) {
    return { delayMs: exponential(attempt, {}, random), problem: `it returned ${describeValue(value)}, not a finite number of ms` };
  }
  return { delayMs: clampDelay(value) };
}

/** Why an object backoff cannot be used, or undefined when it can (checked by defineTask). */
export function invalidBackoff(backoff: unknown): string | undefined {
  if (typeof backoff === 'function') return undefined;
  if (typeof backoff !== 'object' || backoff === null || Array.isArray(backoff))
    return 'backoff must be a function of the attempt or an object { baseMs, maxMs, jitter }';
  const options = backoff as Record<string, unknown>;
  for (const key of ['baseMs', 'maxMs'] as const) {
    const value = options[key];
    if (value !== undefined && (typeof value !== 'number' || !Number.isFinite(value) || value < 0 || value > MAX_BACKOFF_MS))
      return `backoff.${key} must be a finite number from 0 to ${MAX_BACKOFF_MS} (365 days)`;
  }
  const jitter = options.jitter;
  if (jitter !== undefined && (typeof jitter !== 'number' || !(jitter >= 0 && jitter <= 1))) return 'backoff.jitter must be a number from 0 to 1';
  return undefined;
}

function exponential(attempt: number, backoff: BackoffOptions, random: () => number): number {
  const baseMs = finiteOr(backoff.baseMs, DEFAULT_BACKOFF.baseMs);
  const maxMs = finiteOr(backoff.maxMs, DEFAULT_BACKOFF.maxMs);
  const jitter = Math.min(1, Math.max(0, finiteOr(backoff.jitter, DEFAULT_BACKOFF.jitter)));
  const exponent = Math.min(Math.max(Number.isFinite(attempt) ? attempt - 1 : 0, 0), 60);
  const delay = Math.min(maxMs, baseMs * 2 ** exponent);
  const r = random();
  return clampDelay(delay * (1 - jitter * (Number.isFinite(r) ? Math.min(1, Math.max(0, r)) : 0)));
}

function clampDelay(ms: number): number {
  return Math.min(MAX_BACKOFF_MS, Math.max(0, Math.round(ms)));
}

function finiteOr(value: number | undefined, fallback: number): number {
  return typeof value === 'number' && Number.isFinite(value) ? value : fallback;
}

function describeValue(value: unknown): string {
  if (typeof value === 'string') return `the string ${JSON.stringify(value.slice(0, 50))}`;
  if (typeof value === 'number' || value === undefined || value === null || typeof value === 'boolean') return String(value);
  return `a ${typeof value}`;
}

function describeThrown(error: unknown): string {
  try {
    const text = error instanceof Error ? `${String(error.name)}: ${String(error.message)}` : String(error);
    return text.length > 300 ? `${text.slice(0, 300)}…` : text;
  } catch {
    return 'a value that cannot be printed';
  }
}
