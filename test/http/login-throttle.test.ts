/**
 * The throttle of wrong tokens (src/http/token-throttle.ts; the dashboard's login throttle, now
 * also counting bearer tokens): free failures, then doubling waits up to the cap; a success clears
 * one source; sources are counted apart, and keyed so that one host cannot spread over many.
 */
import { expect, test } from 'vitest';
import { createTokenThrottle, platformSource, sourceKey } from '../../src/http/token-throttle.ts';

test('after the free failures each further one doubles the wait, capped; a success clears the source', () => {
  let now = 0;
  const throttle = createTokenThrottle({ perClientFree: 2, baseMs: 1_000, maxMs: 8_000, clock: () => now });
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

test('failures from many sources together hold none of the others (no shared count an attacker could fill to lock the owner out)', () => {
  const throttle = createTokenThrottle({ perClientFree: 5, clock: () => 0 });
  for (let i = 0; i < 10_000; i++) throttle.failed(`10.0.${i >> 8}.${i & 255}`);
  expect(throttle.waitMs('198.51.100.7')).toBe(0);
});

test('a held source is released when its wait ends, and forgotten a while after', () => {
  let now = 0;
  const throttle = createTokenThrottle({ perClientFree: 0, baseMs: 1_000, maxMs: 4_000, clock: () => now });
  throttle.failed('a');
  expect(throttle.waitMs('a')).toBe(1_000);
  now = 1_000;
  expect(throttle.waitMs('a')).toBe(0);
  now = 10_000;
  throttle.waitMs('a'); // forgotten: the next failure starts over
  throttle.failed('a');
  expect(throttle.waitMs('a')).toBe(1_000);
});

test('the source by platform: CF-Connecting-IP, the last X-Forwarded-For hop on Vercel, the socket on Node', () => {
  const request = (headers: Record<string, string>) => new Request('http://x.test/', { headers });
  const spoofed = { 'cf-connecting-ip': '1.1.1.1', 'x-forwarded-for': '2.2.2.2, 3.3.3.3', 'x-real-ip': '4.4.4.4' };
  const node = { incoming: { socket: { remoteAddress: '5.5.5.5' } } };
  expect(platformSource('cloudflare')(request(spoofed))).toBe('1.1.1.1');
  expect(platformSource('vercel')(request(spoofed))?.trim()).toBe('3.3.3.3');
  expect(platformSource('node')(request(spoofed), node)).toBe('5.5.5.5');
  expect(platformSource('node')(request(spoofed))).toBeUndefined();
  // No platform: the socket when there is one; headers alone are not believed.
  expect(platformSource(undefined)(request(spoofed), node)).toBe('5.5.5.5');
  expect(platformSource(undefined)(request(spoofed))).toBeUndefined();
  expect(platformSource(undefined)(request({}), { remoteAddr: { hostname: '6.6.6.6' } })).toBe('6.6.6.6');
});

test('source keys: IPv4 as is (also IPv4-mapped), IPv6 by its /64, nothing for an empty address', () => {
  expect(sourceKey('203.0.113.9')).toBe('203.0.113.9');
  expect(sourceKey(' ::ffff:203.0.113.9 ')).toBe('203.0.113.9');
  expect(sourceKey('2001:db8:1:2::1')).toBe('2001:db8:1:2::/64');
  expect(sourceKey('2001:0DB8:0001:0002:ffff:0:0:9')).toBe('2001:db8:1:2::/64');
  expect(sourceKey('[2001:db8::1]')).toBe('2001:db8:0:0::/64');
  expect(sourceKey('fe80::1%eth0')).toBe('fe80:0:0:0::/64');
  expect(sourceKey('::1')).toBe('0:0:0:0::/64');
  expect(sourceKey('')).toBeUndefined();
  expect(sourceKey(undefined)).toBeUndefined();
});
