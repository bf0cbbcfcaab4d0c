/**
 * `skiplock/client`: a typed client of the HTTP API that runs wherever `fetch` exists and
 * imports no server code.
 */
export {
  createClient,
  type BulkResultJson,
  type CancelResultJson,
  type ClientBulkInput,
  type ClientOptions,
  type EnqueueResultJson,
  type EventJson,
  type EventPageJson,
  type PutScheduleResultJson,
  type SendEventInputJson,
  type SendEventResultJson,
  type SkiplockClient,
} from './client.ts';
export type { StreamChunkJson, StreamJobOptions } from './stream.ts';
export { parseSse, type SseEvent } from './sse.ts';
export { SkiplockApiError, type ApiErrorBody, type ApiErrorCode, type ApiErrorIssue } from './errors.ts';
export type {
  ClientEnqueueInput,
  ClientScheduleInput,
  CountsByStatus,
  EnqueueOptions,
  JobChildJson,
  JobDetailJson,
  JobJson,
  JobStepJson,
  JobPageJson,
  JobStatus,
  ListJobsQuery,
  ListSchedulesQuery,
  ScheduleJson,
  SchedulePageJson,
  StatsJson,
  StepKind,
  StepStatus,
  AnyTask,
  EnqueueInputOf,
  TaskList,
  TaskName,
  TaskPayload,
  TickResultJson,
} from './types.ts';
