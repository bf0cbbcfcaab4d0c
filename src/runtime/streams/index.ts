/**
 * Streams: a run's output as it is written (ctx.stream), read in order (readStream).
 *
 * The capability's public face: what the layers above the runtime (src/http, src/platform, the CLI,
 * the entry points) use of it, and nothing else. They import it from here (.dependency-cruiser.cjs,
 * runtime-through-faces); modules inside src/runtime import one another directly.
 */
export { DEFAULT_STREAM, STREAM_LIMITS, STREAM_NAME, STREAM_READ_LIMITS } from './limits.ts';
export { readStreamInputSchema } from './read.ts';
export type { ReadStreamOptions, ReadStreamResult, StreamChunk } from './read.ts';
export type { StreamWriter } from './writer.ts';
export { createStreamHub, STREAM_POLL } from './hub.ts';
export type { StreamHub, StreamHubOptions, StreamReader } from './hub.ts';
export { STREAM_TOKEN_LIMITS } from './token.ts';
export type { StreamTokenOptions } from './token.ts';
