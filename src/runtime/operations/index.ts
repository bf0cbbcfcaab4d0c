/**
 * Operating the queue: reading and changing jobs, bulk changes, stats, pausing tasks, retention, the schema check.
 *
 * The capability's public face: what the layers above the runtime (src/http, src/platform, the CLI,
 * the entry points) use of it, and nothing else. They import it from here (.dependency-cruiser.cjs,
 * runtime-through-faces); modules inside src/runtime import one another directly.
 */
export { RETRY_DEAD_LIMIT, rescheduleInputSchema } from './admin.ts';
export type { CancelResult } from './admin.ts';
export { bulkInputSchema } from './bulk.ts';
export type { BulkInput, BulkResult } from './bulk.ts';
export type { RetentionOptions } from './maintenance.ts';
export { LIST_LIMIT } from './read-jobs.ts';
export type { JobPage, ListJobsOptions } from './read-jobs.ts';
export { isNotMigrated } from './schema-check.ts';
export type { ActivityMinute, JobStats } from './stats.ts';
export { taskToJson } from './tasks.ts';
export type { TaskInfo } from './tasks.ts';
