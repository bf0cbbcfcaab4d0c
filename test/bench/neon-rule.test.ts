/** Neon's suspend rule as the compute simulation replays it (test/bench/neon-rule.ts). */
import { expect, test } from 'vitest';
import { arrivals, PROFILES } from './neon-profiles.ts';
import { computeUse, perMonth } from './neon-rule.ts';

const MIN = 60_000;

test('active from a statement until 5 minutes after the last; gaps longer than that suspend it', () => {
  const use = computeUse([0, 1 * MIN, 2 * MIN, 20 * MIN], 0, 60 * MIN);
  expect(use.activeMs).toBe(7 * MIN + 5 * MIN); // 0..7 min, then 20..25 min
  expect(use.starts).toBe(2);
  expect(use.cuHours).toBeCloseTo((12 / 60) * 0.25);
});

test('a statement every minute never suspends; the period cuts what runs over', () => {
  const times = Array.from({ length: 60 }, (_, i) => i * MIN);
  expect(computeUse(times, 0, 60 * MIN)).toMatchObject({ activeMs: 60 * MIN, starts: 1, statements: 60 });
  expect(perMonth(computeUse(times, 0, 24 * 60 * MIN)).activeMs).toBeCloseTo((64 / (24 * 60)) * 730 * 60 * MIN) // 0 … 59 + 5 min;
});

test('the profiles: none, 200 and about 300,000 jobs a day', () => {
  const total = (name: string) => arrivals(PROFILES.find((p) => p.name === name)!).reduce((n, [, k]) => n + k, 0);
  expect(total('idle')).toBe(0);
  expect(total('bursts')).toBe(200);
  expect(Math.abs(total('busy') - 300_000)).toBeLessThan(1_000);
});
