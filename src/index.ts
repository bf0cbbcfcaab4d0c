/**
 * `skiplock`: define tasks and schedules, and the queue on a database port. Nothing here needs
 * Node: it runs in Workers, Vercel and Node alike. The drivers and the platform adapters are
 * their own entry points (skiplock/pg, skiplock/neon, skiplock/cloudflare, skiplock/vercel,
 * skiplock/node, skiplock/hono, skiplock/client, skiplock/migrations).
 */
export { createSkiplock, type Logger, type Skiplock, type SkiplockConfig } from './runtime/skiplock.ts';
export type { EnqueueAndWaitOptions, EnqueueAndWaitResult } from './runtime/tasks/index.ts';
export type { RetentionOptions } from './runtime/operations/index.ts';
export type { WaitResult } from './runtime/tasks/index.ts';
export type { OtelApi } from './runtime/observability/index.ts';
export type { AttemptOutcome, AttemptRecord } from './core/attempt-history.ts';
export { defineTask, type CancelOnEvent, type StepContext, type Task, type TaskContext, type TaskDefinition, type WaitForEventOptions, type EventAlternative, type WaitForAnyOptions, type AnyEvent,
  type BatchContext, type BatchItem, type BatchResult, type BatchOptions, type BatchTaskDefinition } from './runtime/tasks/index.ts';
export type { SendEventInput, SendEventResult, StoredEvent } from './runtime/events/index.ts';
export type { CallbackOptions } from './runtime/events/index.ts';
export type { ReadStreamOptions, ReadStreamResult, StreamChunk, StreamWriter } from './runtime/streams/index.ts';
export type { AnyTask, EnqueueInputOf, Register, RegisteredTaskName, RegisteredTasks, EnqueueOptions, TaskList, TaskMap, TaskName, TaskPayload, TaskPayloadOutput } from './runtime/tasks/index.ts';
export type { EnqueueInput, EnqueueResult } from './runtime/tasks/index.ts';
export type { TickOptions } from './runtime/tick/index.ts';
export type { TickIfDueOptions, TickIfDueResult, WakeDriver } from './runtime/wake/index.ts';
export type { DeploymentOptions } from './runtime/wake/index.ts';
export { createMemoryWakeStore, shouldTick, type WakeDecision, type WakeReason, type WakeState, type WakeStore } from './runtime/wake/index.ts';
export type { CancelResult } from './runtime/operations/index.ts';
export type { JobPage, ListJobsOptions } from './runtime/operations/index.ts';
export type { ActivityMinute, JobStats } from './runtime/operations/index.ts';
export type { BulkInput, BulkResult } from './runtime/operations/index.ts';
export type { RestartOptions } from './runtime/steps/index.ts';
export type { CheckReplayInput, CheckReplayResult, ReplayFailure } from './runtime/steps/index.ts';
export { defineSchedule, scheduleInputSchema, type Schedule, type ScheduleDefinition, type ScheduleInput } from './runtime/schedules/index.ts';
export { scheduleToJson, type ListSchedulesOptions, type PutScheduleResult, type ScheduleInfo, type SchedulePage } from './runtime/schedules/index.ts';
export type { CatchUp, Overlap } from './core/schedule.ts';
export { ChildJobError, NotMigratedError, PermanentError, SkiplockError, type ErrorCode, type ErrorIssue } from './core/errors.ts';
export type { SchemaStatus } from './store/schema.ts';
export type { Backoff, BackoffOptions } from './core/backoff.ts';
export type { Job, JobChild, JobDetail, JobStatus, JobStep, StepKind, StepStatus, TickResult } from './core/types.ts';
export type { Row, Sql, Statement } from './store/sql.ts';
export { mapJob as jobFromRow } from './store/rows.ts';
export { migrate, type Migration, type MigrateResult } from './store/migrate.ts';
export { jobToJson } from './store/rows.ts';
