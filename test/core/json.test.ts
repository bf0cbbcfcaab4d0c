import { expect, test } from 'vitest';
import { findUnstorableJson, nestsDeeperThan, unstorableText } from '../../src/core/json.ts';

test('unstorableText: NUL and unpaired surrogates are refused; pairs are fine', () => {
  expect(unstorableText('plain text ✓ 😀')).toBeUndefined();
  expect(unstorableText('a\u0000b')).toMatch(/NUL/);
  expect(unstorableText('\ud800')).toMatch(/surrogate/);
  expect(unstorableText('x\udc00')).toMatch(/surrogate/);
  expect(unstorableText('\udc00\ud800')).toMatch(/surrogate/);
});

test('findUnstorableJson points at the first bad value, key or depth', () => {
  expect(findUnstorableJson({ a: [1, 'two', { three: null }] })).toBeUndefined();
  expect(findUnstorableJson({ a: [1, 'tw\u0000o'] }, ['payload'])).toEqual({ path: ['payload', 'a', 1], message: expect.stringMatching(/NUL/) });
  expect(findUnstorableJson({ ['k\ud800']: 1 })).toEqual({ path: [], message: expect.stringMatching(/key/) });
  expect(findUnstorableJson({ n: 10n })?.path).toEqual(['n']);
  const deep = JSON.parse(`${'['.repeat(100_000)}${']'.repeat(100_000)}`);
  expect(findUnstorableJson(deep)?.message).toMatch(/deeper than 64/);
  const cyclic: Record<string, unknown> = {};
  cyclic.self = cyclic;
  expect(findUnstorableJson(cyclic)?.message).toMatch(/deeper/);
  // Dates and other toJSON values are left to JSON.stringify.
  expect(findUnstorableJson({ at: new Date(0) })).toBeUndefined();
});

test('nestsDeeperThan is iterative', () => {
  expect(nestsDeeperThan({ a: { b: [1] } }, 3)).toBe(false);
  expect(nestsDeeperThan({ a: { b: [1] } }, 2)).toBe(true);
  expect(nestsDeeperThan(JSON.parse(`${'['.repeat(500_000)}${']'.repeat(500_000)}`), 100)).toBe(true);
  expect(nestsDeeperThan('text', 0)).toBe(false);
});
