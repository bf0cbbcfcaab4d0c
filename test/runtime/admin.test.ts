import { expect, test } from 'vitest';
import { decodeCursor, encodeCursor, isJobId } from '../../src/runtime/operations/admin.ts';

test('job ids are canonical positive int8 strings', () => {
  for (const id of ['1', '42', '9223372036854775807']) expect(isJobId(id)).toBe(true);
  for (const id of ['0', '-1', '007', '1e3', ' 1', 'abc', '', '9223372036854775808', '99999999999999999999']) expect(isJobId(id)).toBe(false);
});

test('cursors round-trip and are opaque; anything else is invalid_request', () => {
  for (const id of ['1', '12345', '9223372036854775807']) {
    const cursor = encodeCursor(id);
    expect(cursor).toMatch(/^[A-Za-z0-9_-]+$/);
    expect(cursor).not.toContain(id);
    expect(decodeCursor(cursor)).toBe(id);
  }
  for (const bad of ['', 'a', '!!!!', btoa('j0'), btoa('j-1'), btoa('k12'), btoa('j99999999999999999999'), 'A'.repeat(41)]) {
    expect(() => decodeCursor(bad), bad).toThrow(expect.objectContaining({ code: 'invalid_request' }));
  }
});
