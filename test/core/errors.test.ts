import { describe, expect, test } from 'vitest';
import { describeError, isPermanent } from '../../src/core/errors.ts';

describe('describeError never throws', () => {
  test.each([
    ['an object without a prototype', Object.assign(Object.create(null), { code: 'E1' }), 'a thrown object {"code":"E1"}'],
    ['an empty object without a prototype', Object.create(null), 'a thrown object {}'],
    ['an object whose toString throws', { toString: () => { throw new Error('no'); } }, 'a thrown object {}'],
    ['a revoked Proxy', (() => { const p = Proxy.revocable({}, {}); p.revoke(); return p.proxy; })(), 'a thrown object that cannot be printed'],
    ['a symbol', Symbol('s'), 'Symbol(s)'],
    ['undefined', undefined, 'undefined'],
  ])('%s', (_name, thrown, text) => {
    expect(describeError(thrown)).toBe(text);
    expect(() => isPermanent(thrown)).not.toThrow();
  });

  test('an Error keeps its usual form', () => {
    expect(describeError(new TypeError('bad'))).toBe('TypeError: bad');
  });
});
