/**
 * Schedules: defineSchedule, their input and how they are listed.
 *
 * The capability's public face: what the layers above the runtime (src/http, src/platform, the CLI,
 * the entry points) use of it, and nothing else. They import it from here (.dependency-cruiser.cjs,
 * runtime-through-faces); modules inside src/runtime import one another directly.
 */
export { defineSchedule, scheduleInputSchema } from './definition.ts';
export type { Schedule, ScheduleDefinition, ScheduleInput } from './definition.ts';
export { SCHEDULE_LIST_LIMIT, scheduleToJson } from './schedules.ts';
export type { ListSchedulesOptions, PutScheduleResult, ScheduleInfo, SchedulePage } from './schedules.ts';
