/**
 * Wake-ups: the wake state each platform keeps, tickIfDue, background ticks, waking another deployment.
 *
 * The capability's public face: what the layers above the runtime (src/http, src/platform, the CLI,
 * the entry points) use of it, and nothing else. They import it from here (.dependency-cruiser.cjs,
 * runtime-through-faces); modules inside src/runtime import one another directly.
 */
export { checkDeployment } from './deployment.ts';
export type { DeploymentOptions } from './deployment.ts';
export { DEFAULT_IDLE_CHECK_MS, DURABLE_IDLE_CHECK_MS, WAKE_EARLY_MS, createMemoryWakeStore, mergeLower, mergeWrite, shouldTick } from './state.ts';
export type { WakeDecision, WakeReason, WakeState, WakeStore } from './state.ts';
export { createBackgroundTicks, sleep } from './wake.ts';
export type { TickIfDueOptions, TickIfDueResult, WakeDriver } from './wake.ts';
