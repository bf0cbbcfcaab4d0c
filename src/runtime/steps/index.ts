/**
 * Durable steps: restarting a job from a step and checking replays of new code.
 *
 * The capability's public face: what the layers above the runtime (src/http, src/platform, the CLI,
 * the entry points) use of it, and nothing else. They import it from here (.dependency-cruiser.cjs,
 * runtime-through-faces); modules inside src/runtime import one another directly.
 */
export type { CheckReplayInput, CheckReplayResult, ReplayFailure } from './replay.ts';
export type { RestartOptions } from './restart.ts';
