/**
 * `skiplock`: define tasks and schedules, and the queue on a database port. Nothing here needs
 * Node: it runs in Workers, Vercel and Node alike. The drivers and the platform adapters are
 * their own entry points (skiplock/pg, skiplock/neon, skiplock/cloudflare, skiplock/vercel,
 * skiplock/node, skiplock/hono, skiplock/client, skiplock/migrations).
 */
export { createSkiplock, type Logger, type Skiplock, type SkiplockConfig } from './runtime/skiplock.ts';
export type { EnqueueAndWaitOptions, EnqueueAndWaitResult } from './runtime/tasks/enqueue-operations.ts';
export type { RetentionOptions } from './runtime/operations/maintenance.ts';
export type { WaitResult } from './runtime/tasks/wait-for-job.ts';
export type { OtelApi } from './runtime/observability/tracing.ts';
export type { AttemptOutcome, AttemptRecord } from './core/attempt-history.ts';
export { defineTask, type CancelOnEvent, type StepContext, type Task, type TaskContext, type TaskDefinition, type WaitForEventOptions } from './runtime/tasks/task.ts';
export type { SendEventInput, SendEventResult, StoredEvent } from './runtime/events/events.ts';
export type { CallbackOptions } from './runtime/events/callback-token.ts';
export type { AnyTask, EnqueueInputOf, Register, RegisteredTaskName, RegisteredTasks, EnqueueOptions, TaskList, TaskMap, TaskName, TaskPayload, TaskPayloadOutput } from './runtime/tasks/task-types.ts';
export type { EnqueueInput, EnqueueResult } from './runtime/tasks/enqueue.ts';
export type { TickOptions } from './runtime/tick/tick.ts';
export type { TickIfDueOptions, TickIfDueResult, WakeDriver } from './runtime/wake/wake.ts';
export type { DeploymentOptions } from './runtime/wake/deployment.ts';
export { createMemoryWakeStore, shouldTick, type WakeDecision, type WakeReason, type WakeState, type WakeStore } from './runtime/wake/state.ts';
export type { CancelResult } from './runtime/operations/admin.ts';
export type { JobPage, ListJobsOptions } from './runtime/operations/read-jobs.ts';
export type { ActivityMinute, JobStats } from './runtime/operations/stats.ts';
export type { BulkInput, BulkResult } from './runtime/operations/bulk.ts';
export type { RestartOptions } from './runtime/steps/restart.ts';
export type { CheckReplayInput, CheckReplayResult, ReplayFailure } from './runtime/steps/replay.ts';
export { defineSchedule, scheduleInputSchema, type Schedule, type ScheduleDefinition, type ScheduleInput } from './runtime/schedules/definition.ts';
export { scheduleToJson, type ListSchedulesOptions, type PutScheduleResult, type ScheduleInfo, type SchedulePage } from './runtime/schedules/schedules.ts';
export type { CatchUp, Overlap } from './core/schedule.ts';
export { ChildJobError, NotMigratedError, PermanentError, SkiplockError, type ErrorCode, type ErrorIssue } from './core/errors.ts';
export type { SchemaStatus } from './store/schema.ts';
export type { Backoff, BackoffOptions } from './core/backoff.ts';
export type { Job, JobChild, JobDetail, JobStatus, JobStep, StepKind, StepStatus, TickResult } from './core/types.ts';
export type { Row, Sql, Statement } from './store/sql.ts';
export { mapJob as jobFromRow } from './store/rows.ts';
export { migrate, type Migration, type MigrateResult } from './store/migrate.ts';
export { jobToJson } from './store/rows.ts';
