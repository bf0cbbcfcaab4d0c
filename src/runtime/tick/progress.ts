/**
 * ctx.progress(value): what a handler reports about how far it got. Calls cost nothing: the value
 * is kept here and written with the job's next heartbeat or its result (src/store/leases.ts,
 * claim.ts), never by a round trip of its own; only the latest value is written.
 */
import { findUnstorableJson } from '../../core/json.ts';
import { utf8Length } from '../../core/stored-json.ts';

/** The largest progress value, in bytes of JSON (UTF-8). It is written with every heartbeat and kept in each history entry. */
export const MAX_PROGRESS_BYTES = 2048;

export interface ProgressSlot {
  /** Validates and keeps the value (throws TypeError / RangeError with a clear message). */
  set(value: unknown): void;
  /** The value set since the last acknowledged write, with its version; undefined when nothing changed. */
  pending(): { value: unknown; version: number } | undefined;
  /** The write carrying `version` landed: nothing is pending unless a newer value was set meanwhile. */
  written(version: number): void;
}

export function createProgressSlot(): ProgressSlot {
  let value: unknown;
  let version = 0;
  let writtenVersion = 0;
  return {
    set(next) {
      value = toProgressJson(next);
      version += 1;
    },
    pending: () => (version > writtenVersion ? { value, version } : undefined),
    written(v) {
      writtenVersion = Math.max(writtenVersion, v);
    },
  };
}

/** The value as it will be stored, or a clear error. */
export function toProgressJson(value: unknown): unknown {
  let text: string | undefined;
  try {
    text = JSON.stringify(value);
  } catch (error) {
    throw new TypeError(`ctx.progress: the value is not JSON-serializable (${String(error)})`);
  }
  if (text === undefined) throw new TypeError('ctx.progress: the value is not JSON (undefined, a function or a symbol)');
  const bytes = utf8Length(text);
  if (bytes > MAX_PROGRESS_BYTES)
    throw new RangeError(`ctx.progress: the value is ${bytes} bytes of JSON, more than the ${MAX_PROGRESS_BYTES} allowed; report a small summary ({ done, total })`);
  const json: unknown = JSON.parse(text);
  const unstorable = findUnstorableJson(json, ['progress']);
  if (unstorable) throw new TypeError(`ctx.progress: the value cannot be stored: ${unstorable.message} at ${unstorable.path.join('.')}`);
  return json;
}
