/** What a run stores as JSON is measured in bytes of UTF-8, as PostgreSQL receives it. */
import fc from 'fast-check';
import { expect, test } from 'vitest';
import { toStoredJson, utf8Length } from '../../src/core/stored-json.ts';

test('utf8Length is what TextEncoder makes of any string, lone surrogates included', () => {
  for (const s of ['', 'abc', 'é', '€', '😀', '\ud800', 'a\udfffb', '\udbff', `${'€'.repeat(1000)}😀x`]) expect(utf8Length(s), JSON.stringify(s)).toBe(new TextEncoder().encode(s).length);
  fc.assert(fc.property(fc.string({ unit: 'binary' }), (s) => utf8Length(s) === new TextEncoder().encode(s).length));
  fc.assert(fc.property(fc.string({ unit: fc.integer({ min: 0, max: 0xffff }).map((c) => String.fromCharCode(c)) }), (s) => utf8Length(s) === new TextEncoder().encode(s).length));
});

test('toStoredJson counts bytes, not characters', () => {
  expect(toStoredJson('€'.repeat(10), 'result', 'the result')).toMatchObject({ bytes: 32 });
  expect(toStoredJson('€'.repeat(100), 'result', 'the result', 200)).toMatchObject({ error: { message: 'the result is 302 bytes as JSON, more than the 200 allowed (store it elsewhere and return a reference)' } });
});
