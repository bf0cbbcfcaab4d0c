/**
 * What the HTTP API sends and accepts, as plain types (CONTRACT.md "HTTP API"), and the task
 * typing of the client. Type-only: nothing here exists at run time.
 */
import type { JobStatus } from '../core/types.ts';
import type { EnqueueInput } from '../runtime/enqueue.ts';
import type { ScheduleInput as LibraryScheduleInput } from '../runtime/schedule-definition.ts';

export type { JobStatus };

/** A job as the API sends it: ids are strings, instants ISO-8601 strings in UTC. */
export interface JobJson<Payload = unknown> {
  id: string;
  task: string;
  payload: Payload;
  status: JobStatus;
  priority: number;
  runAt: string;
  attempts: number;
  maxAttempts: number;
  timeoutMs: number;
  lockedBy: string | null;
  lockedUntil: string | null;
  lastError: string | null;
  result: unknown;
  idempotencyKey: string | null;
  scheduleName: string | null;
  scheduledFor: string | null;
  createdAt: string;
  updatedAt: string;
  finishedAt: string | null;
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
}

export interface TickResultJson {
  claimed: number;
  done: number;
  retried: number;
  dead: number;
  cancelled: number;
  reaped: number;
  fired: number;
  staleWrites: number;
}

export interface ScheduleJson {
  name: string;
  /** 'static': defined in the deployment's code; 'dynamic': put through the API. */
  source: 'static' | 'dynamic';
  cron: string | null;
  /** The interval in ms, for `every` schedules. */
  every: number | null;
  daily: string[] | null;
  tz: string;
  task: string;
  payload: unknown;
  enabled: boolean;
  catchUp: 'all' | 'latest' | 'none';
  overlap: 'allow' | 'skip';
  maxFiringsPerTick: number;
  nextRunAt: string | null;
  lastFiredAt: string | null;
  lastScheduledFor: string | null;
  lastJobId: string | null;
  lastStatus: JobStatus | null;
  state: unknown;
}

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

// ---- task typing

/** Anything with a task's name and payload schema: what `defineTask` returns. */
export interface TaskLike {
  readonly name: string;
  readonly payload: unknown;
}

/** The tasks a client is typed by: the array (or record) of tasks given to createSkiplock. */
export type TaskSet = readonly TaskLike[] | { readonly [key: string]: TaskLike };

type TaskOf<Tasks extends TaskSet> = Tasks extends readonly (infer T)[] ? T : Tasks[keyof Tasks];

/** The task names of a task set (`string` when the tasks do not keep their literal names). */
export type TaskName<Tasks extends TaskSet> = TaskOf<Tasks>['name'];

/** What a task's payload schema accepts (zod's input type); `unknown` for an untyped task. */
export type TaskPayloadInput<Tasks extends TaskSet, Name extends TaskName<Tasks>> =
  Extract<TaskOf<Tasks>, { readonly name: Name }>['payload'] extends { readonly _zod: { readonly input: infer Input } } ? Input : unknown;

/** `payload` may be left out (it is `{}` then) only where the task's schema accepts `{}`. */
type PayloadField<Payload> = {} extends Payload ? { payload?: Payload } : { payload: Payload };

/** The enqueue options beside task and payload (runAt, delayMs, priority, maxAttempts, timeoutMs, idempotencyKey). */
export type EnqueueOptions = Omit<EnqueueInput, 'task' | 'payload'>;

/** One job to enqueue: a task of the set and a payload that fits its schema. */
export type ClientEnqueueInput<Tasks extends TaskSet = readonly TaskLike[]> = {
  [Name in TaskName<Tasks>]: { task: Name } & PayloadField<TaskPayloadInput<Tasks, Name>> & EnqueueOptions;
}[TaskName<Tasks>];

/** A dynamic schedule: its timing and options, a task of the set and a payload that fits it. */
export type ClientScheduleInput<Tasks extends TaskSet = readonly TaskLike[]> = {
  [Name in TaskName<Tasks>]: { task: Name } & PayloadField<TaskPayloadInput<Tasks, Name>> & Omit<LibraryScheduleInput, 'task' | 'payload'>;
}[TaskName<Tasks>];
