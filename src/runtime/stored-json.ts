/** What a run stores as JSON (a result, a schedule state, a step's output), checked before it is written. */
import { describeError } from '../core/errors.ts';
import { findUnstorableJson } from '../core/json.ts';

/** The largest result (or setState value) a run may store, in bytes of JSON: 1 MiB. */
export const MAX_RESULT_BYTES = 1024 * 1024;

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
    bytes = text.length * 3 <= maxBytes ? text.length : new TextEncoder().encode(text).length;
    if (bytes > maxBytes) return { error: new Error(`${what} is ${bytes} bytes as JSON, more than the ${maxBytes} allowed (store it elsewhere and return a reference)`) };
    json = JSON.parse(text);
  } catch (error) {
    return { error: new Error(`${what} is not JSON-serializable: ${describeError(error)}`) };
  }
  const unstorable = findUnstorableJson(json, [root]);
  return unstorable ? { error: new Error(`${what} cannot be stored: ${unstorable.message} at ${unstorable.path.join('.')}`) } : { value: json, bytes };
}
