/** The dashboard's login throttle: free failures, then doubling waits up to the cap; a success clears one client. */
import { expect, test } from 'vitest';
import { clientAddress, createLoginThrottle } from '../../src/http/dashboard/login-throttle.ts';

test('after the free failures each further one doubles the wait, capped; a success clears the client', () => {
  let now = 0;
  const throttle = createLoginThrottle({ perClientFree: 2, globalFree: 100, baseMs: 1_000, maxMs: 8_000, clock: () => now });
  const waits: number[] = [];
  for (let i = 0; i < 7; i++) {
    throttle.failed('a');
    waits.push(throttle.waitMs('a'));
    now += throttle.waitMs('a');
  }
  expect(waits).toEqual([0, 0, 1_000, 2_000, 4_000, 8_000, 8_000]);
  expect(throttle.waitMs('b')).toBe(0);
  throttle.succeeded('a');
  throttle.failed('a');
  expect(throttle.waitMs('a')).toBe(0);
});

test('failures from many addresses together are throttled too (spoofed X-Forwarded-For)', () => {
  const throttle = createLoginThrottle({ perClientFree: 5, globalFree: 3, clock: () => 0 });
  for (let i = 0; i < 4; i++) throttle.failed(`10.0.0.${i}`);
  expect(throttle.waitMs('10.9.9.9')).toBeGreaterThan(0);
});

test('the client address comes from the platform headers', () => {
  const from = (headers: Record<string, string>) => clientAddress((name) => headers[name]);
  expect(from({ 'cf-connecting-ip': '1.1.1.1', 'x-forwarded-for': '2.2.2.2' })).toBe('1.1.1.1');
  expect(from({ 'x-forwarded-for': '2.2.2.2, 3.3.3.3' })).toBe('2.2.2.2');
  expect(from({})).toBe('unknown');
});
