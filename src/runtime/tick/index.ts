/**
 * The tick: its options and defaults, metrics, retry backoff.
 *
 * The capability's public face: what the layers above the runtime (src/http, src/platform, the CLI,
 * the entry points) use of it, and nothing else. They import it from here (.dependency-cruiser.cjs,
 * runtime-through-faces); modules inside src/runtime import one another directly.
 */
export { TICK_DURATION_BUCKETS } from './metrics.ts';
export type { TickTotals } from './metrics.ts';
export { TICK_DEFAULTS } from './options.ts';
export type { TickOptions } from './options.ts';
export { retryDelayMs } from './retry-backoff.ts';
export type { RetryBackoff } from './retry-backoff.ts';
