/**
 * Observability: the logger and OpenTelemetry tracing.
 *
 * The capability's public face: what the layers above the runtime (src/http, src/platform, the CLI,
 * the entry points) use of it, and nothing else. They import it from here (.dependency-cruiser.cjs,
 * runtime-through-faces); modules inside src/runtime import one another directly.
 */
export { consoleLog } from './log.ts';
export type { Logger } from './log.ts';

export type { OtelApi } from './tracing.ts';
