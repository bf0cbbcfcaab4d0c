/** The limits and timings of streams (docs/streams.md): shared by the writer and the reader. */
import { permanentTypeError } from '../../core/errors.ts';

export const STREAM_LIMITS = {
  /** One chunk, in bytes of JSON (a string counts its quotes and escapes): 64 KiB. Larger: a RangeError, nothing buffered. */
  maxChunkBytes: 64 * 1024,
  /** All the chunks one run (one attempt) may write, in bytes of JSON: 16 MiB. Past it: a RangeError. */
  maxRunBytes: 16 * 1024 * 1024,
  /** A stream's name: 1 to 64 of A–Z a–z 0–9 _ . : - (it goes in a URL's query). Default 'default'. */
  maxNameLength: 64,
  /** A buffered chunk waits at most this long before its flush starts. */
  flushMs: 100,
  /** A flush starts at once when this many chunks are buffered… */
  flushChunks: 100,
  /** …or this many bytes of JSON. Also the most one flush statement carries (several follow each other beyond). */
  flushBytes: 256 * 1024,
} as const;

/** readStream's page: at most `maxLimit` chunks (default `defaultLimit`) and about `maxBytes` of JSON (at least one chunk). */
export const STREAM_READ_LIMITS = { defaultLimit: 100, maxLimit: 1000, maxBytes: 1024 * 1024 } as const;

export const STREAM_NAME = /^[A-Za-z0-9_.:-]{1,64}$/;
export const DEFAULT_STREAM = 'default';

/** ctx.stream's name, checked (a TypeError that fails the attempt for good when it is not a valid one). */
export function streamName(name: unknown): string {
  if (name === undefined) return DEFAULT_STREAM;
  if (typeof name === 'string' && STREAM_NAME.test(name)) return name;
  throw permanentTypeError(`ctx.stream: the name must be 1 to ${STREAM_LIMITS.maxNameLength} of A-Z a-z 0-9 _ . : -, got ${typeof name === 'string' ? JSON.stringify(name.slice(0, 80)) : typeof name}`);
}
