/** The tick loop's retry schedule after a failed statement (src/runtime/tick/retry-backoff.ts): pure. */
import { expect, test } from 'vitest';
import { RETRY_BACKOFF, retryDelayMs, retryDelayRange } from '../../src/runtime/tick/retry-backoff.ts';

const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });
const shutdown = Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01' });
const refusedStatement = Object.assign(new Error('division by zero'), { code: '22012' });

test('a lost connection: 100 ms doubling, jittered between half and all of the ceiling, capped at 1 s', () => {
  const ceilings = [1, 2, 3, 4, 5, 6, 20].map((n) => retryDelayRange(n, refused).max);
  expect(ceilings).toEqual([100, 200, 400, 800, 1_000, 1_000, 1_000]);
  expect(retryDelayRange(3, shutdown)).toEqual({ min: 200, max: 400 });
  expect(retryDelayMs(3, refused, () => 0)).toBe(200);
  expect(retryDelayMs(3, refused, () => 0.999999)).toBe(400);
  expect(retryDelayMs(40, refused, () => 0.5)).toBe(750);
});

test('any other failure (the database answered with an error): the same start, capped at 5 s, never 0', () => {
  const ceilings = [1, 2, 3, 4, 5, 6, 7, 8, 100].map((n) => retryDelayRange(n, refusedStatement).max);
  expect(ceilings).toEqual([100, 200, 400, 800, 1_600, 3_200, 5_000, 5_000, 5_000]);
  expect(retryDelayRange(100, undefined).max).toBe(RETRY_BACKOFF.maxMs);
  expect(retryDelayMs(1, 'the wake state was not written', () => 0)).toBe(50);
});
