/**
 * Flow control: why a job waits for its concurrency or rate-limit key.
 *
 * The capability's public face: what the layers above the runtime (src/http, src/platform, the CLI,
 * the entry points) use of it, and nothing else. They import it from here (.dependency-cruiser.cjs,
 * runtime-through-faces); modules inside src/runtime import one another directly.
 */
export { describeFlowWait } from './status.ts';
export type { FlowStatus, FlowWait } from './status.ts';
export type { FairKey, FairLevel, FairnessStatus } from './fairness.ts';
