import { describe, expect, test } from 'vitest';
import { backoffDelayMs, MAX_BACKOFF_MS, retryDelay } from '../../src/core/backoff.ts';
import { PermanentError } from '../../src/core/errors.ts';
import { failed } from '../../src/core/state.ts';

describe('backoffDelayMs', () => {
  test('doubles from 10 s per attempt and stops at 1 h (no jitter at random = 0)', () => {
    const delays = [1, 2, 3, 4, 8, 9, 10, 50].map((attempt) => backoffDelayMs(attempt, {}, () => 0));
    expect(delays).toEqual([10_000, 20_000, 40_000, 80_000, 1_280_000, 2_560_000, 3_600_000, 3_600_000]);
  });

  test('jitter only shortens, by at most the jitter fraction', () => {
    for (let attempt = 1; attempt <= 12; attempt++) {
      const ceiling = Math.min(3_600_000, 10_000 * 2 ** (attempt - 1));
      for (const r of [0, 0.25, 0.5, 0.999999]) {
        const delay = backoffDelayMs(attempt, {}, () => r);
        expect(delay).toBeLessThanOrEqual(ceiling);
        expect(delay).toBeGreaterThanOrEqual(Math.floor(ceiling * 0.75));
      }
    }
    expect(backoffDelayMs(1, {}, () => 0.999999)).toBe(7_500);
  });

  test('options and functions per task', () => {
    expect(backoffDelayMs(3, { baseMs: 1_000, maxMs: 3_000, jitter: 0 })).toBe(3_000);
    expect(backoffDelayMs(2, { baseMs: 100, jitter: 1 }, () => 0.5)).toBe(100);
    expect(backoffDelayMs(4, (attempt) => attempt * 1_000)).toBe(4_000);
  });
});

describe('failed', () => {
  test('a transient error is retried while attempts remain', () => {
    expect(failed({ attempts: 1, maxAttempts: 3 }, new Error('boom'), { jitter: 0 })).toEqual({
      kind: 'retry',
      error: 'Error: boom',
      delayMs: 10_000,
    });
  });

  test('the last attempt and a permanent error are DEAD', () => {
    expect(failed({ attempts: 3, maxAttempts: 3 }, new Error('boom')).kind).toBe('dead');
    expect(failed({ attempts: 1, maxAttempts: 3 }, new PermanentError('bad data')).kind).toBe('dead');
    expect(failed({ attempts: 1, maxAttempts: 3 }, Object.assign(new Error('x'), { permanent: true })).kind).toBe('dead');
  });
});

describe('a backoff that cannot be used', () => {
  test('a function that throws or returns no finite number gets the default for that attempt, and says why', () => {
    for (const bad of [() => Number.NaN, () => Number.POSITIVE_INFINITY, () => undefined as unknown as number, () => '5' as unknown as number]) {
      const { delayMs, problem } = retryDelay(2, bad, () => 0);
      expect(delayMs).toBe(20_000);
      expect(problem).toMatch(/not a finite number of ms/);
    }
    const thrown = retryDelay(3, (n) => [1][n]!.valueOf(), () => 0);
    expect(thrown).toMatchObject({ delayMs: 40_000, problem: expect.stringMatching(/^it threw TypeError: /) });
  });

  test('finite delays are clamped to 0…MAX_BACKOFF_MS', () => {
    expect(backoffDelayMs(1, () => -5)).toBe(0);
    expect(backoffDelayMs(1, () => 1e300)).toBe(MAX_BACKOFF_MS);
    expect(backoffDelayMs(1, { baseMs: 1e300, maxMs: 1e300, jitter: 0 })).toBe(MAX_BACKOFF_MS);
  });

  test('failed() never throws, whatever the backoff does', () => {
    const outcome = failed({ attempts: 1, maxAttempts: 3 }, new Error('boom'), () => {
      throw new Error('table too short');
    });
    expect(outcome).toMatchObject({ kind: 'retry', error: "Error: boom (the task's backoff failed: it threw Error: table too short; the default backoff was used)" });
  });
});
