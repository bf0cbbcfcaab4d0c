export {
  createSkiplock,
  type EnqueueAndWaitOptions,
  type EnqueueAndWaitResult,
  type Skiplock,
  type SkiplockConfig,
  type RetentionOptions,
} from './runtime/skiplock.ts';
export type { WaitResult } from './runtime/wait-for-job.ts';
export type { OtelApi } from './runtime/tracing.ts';
export type { AttemptOutcome, AttemptRecord } from './core/attempt-history.ts';
export { defineTask, type Task, type TaskContext, type TaskDefinition } from './runtime/task.ts';
export type { EnqueueInput, EnqueueResult } from './runtime/enqueue.ts';
export type { TickOptions } from './runtime/tick.ts';
export type { ActivityMinute, CancelResult, JobPage, JobStats, ListJobsOptions } from './runtime/admin.ts';
export { createApp, type AppOptions } from './http/app.ts';
export { defineSchedule, scheduleInputSchema, type Schedule, type ScheduleDefinition, type ScheduleInput } from './runtime/schedule-definition.ts';
export { scheduleToJson, type ListSchedulesOptions, type PutScheduleResult, type ScheduleInfo, type SchedulePage } from './runtime/schedules.ts';
export type { CatchUp, Overlap } from './core/schedule.ts';
export { PermanentError, SkiplockError, type ErrorCode } from './core/errors.ts';
export type { Backoff, BackoffOptions } from './core/backoff.ts';
export type { Job, JobStatus, TickResult } from './core/types.ts';
export type { Sql, Statement } from './store/sql.ts';
export { createPgDriver } from './store/drivers/pg.ts';
export { createNeonHttpDriver } from './store/drivers/neon-http.ts';
export { createNeonWsDriver } from './store/drivers/neon-ws.ts';
export { migrate, type Migration } from './store/migrate.ts';
