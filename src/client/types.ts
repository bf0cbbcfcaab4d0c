/**
 * What the HTTP API sends and accepts, as plain types (CONTRACT.md "HTTP API"), and the task
 * typing of the client. Type-only: nothing here exists at run time.
 */
import type { Job, JobStatus, JobStep, StepKind, StepStatus, TickResult } from '../core/types.ts';
import type { ScheduleInfo } from '../runtime/schedules/index.ts';
import type { ScheduleInput as LibraryScheduleInput } from '../runtime/schedules/index.ts';
import type { AnyTask, EnqueueInputOf, TaskList } from '../runtime/tasks/index.ts';
import type { z } from 'zod';

export type { JobStatus, StepKind, StepStatus };
export type { AnyTask, EnqueueInputOf, EnqueueOptions, TaskList, TaskName, TaskPayload } from '../runtime/tasks/index.ts';

/** A type as JSON carries it: each Date (or Date | null) field an ISO-8601 string (or null). */
type AsJson<T> = { [K in keyof T]: T[K] extends Date ? string : T[K] extends Date | null ? string | null : T[K] };

/**
 * A job as the API sends it (src/store/rows.ts jobToJson): the library's Job, ids as strings,
 * instants as ISO-8601 strings in UTC, without what stays on the server (cancelRequested,
 * scheduleState).
 */
export type JobJson<Payload = unknown> = AsJson<Omit<Job<Payload>, 'cancelRequested' | 'scheduleState' | 'history'> & { history: AttemptRecordJson[] }>;

/** One durable step of a job (ctx.step, ctx.sleep, ctx.invoke), as GET /v1/jobs/:id sends it: the library's JobStep, times as ISO strings. */
export type JobStepJson = AsJson<JobStep>;

/** A job that ctx.invoke enqueued. */
export interface JobChildJson {
  id: string;
  task: string;
  status: JobStatus;
  /** The parent's invoke step that enqueued it. */
  parentStep: string;
}

/** GET /v1/jobs/:id: the job with its steps and children (lists of jobs do not load them). */
export interface JobDetailJson<Payload = unknown> extends JobJson<Payload> {
  /** In the order the handler reached them. */
  steps: JobStepJson[];
  /** The first 1000 by id; the invoke steps name every child. */
  children: JobChildJson[];
}

/** One attempt of a job, as the API sends it (src/core/attempt-history.ts). */
export interface AttemptRecordJson {
  attempt: number;
  startedAt: string | null;
  endedAt: string;
  durationMs: number | null;
  /** done, retry, dead, released, sleeping, waiting, lease-lost or cancelled. */
  outcome: string;
  error: string | null;
  worker: string | null;
  progress: unknown;
  traceparent: string | null;
}

export interface JobPageJson {
  /** Newest first. */
  jobs: JobJson[];
  /** Pass it as `cursor` for the next page; null on the last page. */
  nextCursor: string | null;
}

export type CountsByStatus = Record<JobStatus, number>;

export interface StatsJson {
  counts: CountsByStatus;
  byTask: Record<string, CountsByStatus>;
  /** How long the longest-waiting due QUEUED job has waited, in ms; 0 when none. */
  oldestQueuedAgeMs: number;
  /** QUEUED or WAITING jobs of tasks the serving deployment does not register, by task (another service may run them). */
  unrunnable: { task: string; queued: number; waiting: number }[];
  /** The queue's depth, exact: QUEUED due now and not yet, RUNNING, WAITING. */
  depth: { due: number; scheduled: number; running: number; waiting: number };
  /** `estimated` when more than 10,000 jobs are DONE: the DONE counts are then estimates; the rest is exact. */
  doneCount: 'exact' | 'estimated';
}

/** What a tick did: numbers only, so the JSON is the library's TickResult itself. */
export type TickResultJson = TickResult;

/** A schedule as the API sends it: the library's ScheduleInfo, instants as ISO-8601 strings. */
export type ScheduleJson = AsJson<ScheduleInfo>;

export interface SchedulePageJson {
  schedules: ScheduleJson[];
  nextCursor: string | null;
}

export interface ListJobsQuery {
  status?: JobStatus;
  task?: string;
  /** Page size, 1 to 500. Default 50. */
  limit?: number;
  /** `nextCursor` of the previous page. */
  cursor?: string;
}

export interface ListSchedulesQuery {
  /** Page size. */
  limit?: number;
  cursor?: string;
  /** Only names that start with it. */
  prefix?: string;
}

// ---- task typing (the library's own: src/runtime/tasks/task-types.ts)

/** One job to enqueue: a task of the list and a payload that fits its schema (the library's EnqueueInputOf). */
export type ClientEnqueueInput<Tasks extends TaskList = TaskList> = EnqueueInputOf<Tasks>;

type ScheduleFor<T> = T extends AnyTask
  ? { task: T['name'] } & ({} extends z.input<T['payload']> ? { payload?: z.input<T['payload']> } : { payload: z.input<T['payload']> }) &
      Omit<LibraryScheduleInput, 'task' | 'payload'>
  : never;

/** A dynamic schedule: its timing and options, a task of the list and a payload that fits it. */
export type ClientScheduleInput<Tasks extends TaskList = TaskList> = ScheduleFor<Tasks[number]>;
