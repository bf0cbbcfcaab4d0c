/** What a run stores as JSON (a result, a schedule state, a step's output), checked before it is written. */
import { describeError } from './errors.ts';
import { findUnstorableJson } from './json.ts';

/** The largest result (or setState value) a run may store, in bytes of JSON: 1 MiB. */
export const MAX_RESULT_BYTES = 1024 * 1024;

/** The length of a string in bytes of UTF-8, without encoding it (a lone surrogate counts as U+FFFD: 3). */
export function utf8Length(text: string): number {
  let bytes = text.length;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c < 0x80) continue;
    if (c < 0x800) bytes += 1;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < text.length && (text.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
      bytes += 2; // a pair: 4 bytes for its 2 units
      i += 1;
    } else bytes += 2;
  }
  return bytes;
}

/**
 * A value as jsonb will hold it: refuse what JSON cannot carry instead of storing a lie, and what
 * jsonb refuses (NUL, lone surrogates), since one such value would fail its whole batch's write.
 */
export function toStoredJson(value: unknown, root: string, what: string, maxBytes = MAX_RESULT_BYTES): { value: unknown; bytes: number } | { error: Error } {
  let json: unknown;
  let bytes: number;
  try {
    const text: string | undefined = value === undefined ? 'null' : JSON.stringify(value);
    if (text === undefined) return { error: new Error(`${what} is not JSON-serializable: a ${typeof value}`) };
    // Too large for one statement would fail its whole batch's write: refused here, alone.
    bytes = utf8Length(text);
    if (bytes > maxBytes) return { error: new Error(`${what} is ${bytes} bytes as JSON, more than the ${maxBytes} allowed (store it elsewhere and return a reference)`) };
    json = JSON.parse(text);
  } catch (error) {
    return { error: new Error(`${what} is not JSON-serializable: ${describeError(error)}`) };
  }
  const unstorable = findUnstorableJson(json, [root]);
  return unstorable ? { error: new Error(`${what} cannot be stored: ${unstorable.message} at ${unstorable.path.join('.')}`) } : { value: json, bytes };
}
