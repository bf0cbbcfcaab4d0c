/**
 * Events: sending and listing them, their limits and names, callbacks' options.
 *
 * The capability's public face: what the layers above the runtime (src/http, src/platform, the CLI,
 * the entry points) use of it, and nothing else. They import it from here (.dependency-cruiser.cjs,
 * runtime-through-faces); modules inside src/runtime import one another directly.
 */
export type { CallbackOptions } from './callback-token.ts';
export { eventNameSchema } from './names.ts';
export { EVENT_LIMITS, EVENT_LIST_LIMIT, eventToJson, listEventsWith, sendEventInputSchema } from './events.ts';
export type { SendEventInput, SendEventResult, StoredEvent } from './events.ts';
