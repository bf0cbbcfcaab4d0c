/**
 * createClient: the HTTP API as typed functions, for any runtime with `fetch` (a browser, a
 * Worker, a Vercel function, Node ≥ 18). It imports no server code, so bundling it brings in
 * neither a driver nor zod: only this folder.
 */
import { errorFromResponse, SkiplockApiError } from './errors.ts';
import { streamJob, type StreamChunkJson, type StreamJobOptions } from './stream.ts';
import type { SendEventResult } from '../runtime/events/index.ts';
import type {
  ClientEnqueueInput,
  ClientScheduleInput,
  JobDetailJson,
  JobJson,
  JobPageJson,
  ListJobsQuery,
  ListSchedulesQuery,
  ScheduleJson,
  SchedulePageJson,
  StatsJson,
  TaskList,
  TickResultJson,
} from './types.ts';

export interface ClientOptions {
  /** Where the API is mounted, e.g. `https://queue.example.com` or `https://example.com/skiplock`. */
  url: string;
  /** The API_TOKEN, sent as `Authorization: Bearer <token>`. */
  token: string;
  /** The fetch to use. Default: the global `fetch`. Tests pass `app.fetch`-like functions. */
  fetch?: (request: Request) => Response | Promise<Response>;
  /** Extra headers on every request. */
  headers?: Record<string, string>;
}

export interface EnqueueResultJson {
  job: JobJson;
  /** False when the idempotency key matched an existing job, which is returned instead (HTTP 200). */
  created: boolean;
}

export interface CancelResultJson {
  job: JobJson;
  /** `cancelled`: it was QUEUED and is CANCELLED now (200); `requested`: it is RUNNING and was asked to stop (202). */
  outcome: 'cancelled' | 'requested';
}

/** POST /v1/jobs/bulk's body (docs/operations.md, "Bulk operations"). */
export interface ClientBulkInput {
  action: 'retry' | 'cancel' | 'restart' | 'delete';
  /** At least one field; every field given must hold. */
  where: {
    task?: string;
    /** One status or several, in any case. */
    status?: string | string[];
    /** A substring of the job's last error (case-sensitive). */
    errorContains?: string;
    /** ISO-8601 instants. */
    createdBefore?: string;
    createdAfter?: string;
    /** The job's concurrency or rate-limit key. */
    key?: string;
  };
  /** Count, write nothing: the answer's `changed` is 0 and `wouldChange` what it would change. */
  dryRun?: boolean;
  /** restart only: the step to restart from. */
  fromStep?: string;
}

export interface BulkResultJson {
  /** Jobs the filter matched. */
  matched: number;
  /** Jobs the action changed; 0 in a dry run. */
  changed: number;
  /** With dryRun only: the jobs the action would change now. */
  wouldChange?: number;
}

export interface PutScheduleResultJson {
  schedule: ScheduleJson;
  /** False when a dynamic schedule of that name was replaced. */
  created: boolean;
}

/** The client of one skiplock API; every method throws a SkiplockApiError for a refusal. */
export interface SkiplockClient<Tasks extends TaskList = TaskList> {
  /** POST /v1/jobs: the job (the original one when its idempotency key was seen before). */
  enqueue(input: ClientEnqueueInput<Tasks>): Promise<JobJson>;
  /** POST /v1/jobs, telling a new job from an idempotency-key replay. */
  enqueueWithResult(input: ClientEnqueueInput<Tasks>): Promise<EnqueueResultJson>;
  /**
   * POST /v1/jobs?wait=<seconds>: enqueues and holds the request until the job ends or `waitSeconds`
   * (at most 25) pass. `finished` true with the job DONE, DEAD or CANCELLED (HTTP 200); false with
   * the job as it is while it still runs (HTTP 202).
   */
  enqueueAndWait(input: ClientEnqueueInput<Tasks>, options: { waitSeconds: number }): Promise<{ job: JobJson; finished: boolean }>;
  /** POST /v1/jobs/batch: up to 1000 jobs, all or none, in input order. */
  enqueueBatch(inputs: readonly ClientEnqueueInput<Tasks>[]): Promise<JobJson[]>;
  /** GET /v1/jobs/:id: the job with its durable steps and children; undefined when there is no such job. */
  getJob(id: string): Promise<JobDetailJson | undefined>;
  /** GET /v1/jobs: one page, newest first. */
  listJobs(query?: ListJobsQuery): Promise<JobPageJson>;
  /** POST /v1/jobs/:id/cancel: a QUEUED job is cancelled, a RUNNING one asked to stop; a finished one is a conflict. */
  cancelJob(id: string): Promise<CancelResultJson>;
  /** POST /v1/jobs/:id/retry: a DEAD or CANCELLED job back to QUEUED, due now. */
  retryJob(id: string): Promise<JobJson>;
  /** POST /v1/jobs/retry-dead: up to `limit` DEAD jobs queued again; the number queued. */
  retryDead(options?: { task?: string; limit?: number }): Promise<number>;
  /** POST /v1/jobs/:id/restart: the job queued again from `fromStep` (omitted: from the top), the steps before it kept. */
  restartJob(id: string, options?: { fromStep?: string | null }): Promise<JobJson>;
  /** POST /v1/jobs/bulk: retry, cancel, restart or delete every job `where` matches. */
  bulk(input: ClientBulkInput): Promise<BulkResultJson>;
  /** GET /v1/stats. */
  stats(): Promise<StatsJson>;
  /** GET /v1/schedules: one page of every schedule, static and dynamic. */
  listSchedules(query?: ListSchedulesQuery): Promise<SchedulePageJson>;
  /** GET /v1/schedules/:name; undefined when there is no such schedule. */
  getSchedule(name: string): Promise<ScheduleJson | undefined>;
  /** PUT /v1/schedules/:name: creates or replaces a dynamic schedule. */
  putSchedule(name: string, input: ClientScheduleInput<Tasks>): Promise<PutScheduleResultJson>;
  /** DELETE /v1/schedules/:name: true when removed, false when there was no dynamic schedule of that name. */
  deleteSchedule(name: string): Promise<boolean>;
  /** POST /v1/tick: one tick now; what it did. */
  tick(): Promise<TickResultJson>;
  /** POST /v1/events: stores the event, wakes its waiters, starts its `on:` tasks, applies cancelOn. */
  sendEvent(input: SendEventInputJson): Promise<SendEventResultJson>;
  /** GET /v1/events: one page of stored events, newest first. */
  listEvents(query?: { name?: string; key?: string; limit?: number; cursor?: string }): Promise<EventPageJson>;
  /**
   * GET /v1/jobs/:id/stream: the chunks of a job's stream (ctx.stream) as they are written, as an
   * async iterator that reconnects when a connection ends or drops and resumes after the last seq
   * it yielded (each chunk once, in order). It ends at the stream's end (the job finished), or
   * when `signal` aborts; a refusal (no such job, a bad name, a wrong token) is thrown.
   */
  streamJob(id: string, options?: StreamJobOptions): AsyncIterable<StreamChunkJson>;
}

/** What POST /v1/events takes. */
export interface SendEventInputJson {
  name: string;
  key?: string;
  data?: unknown;
  idempotencyKey?: string;
}

/** What a send answers (the library's SendEventResult; `created` false for a replay of an idempotency key, HTTP 200). */
export type SendEventResultJson = SendEventResult;

export interface EventJson {
  id: string;
  name: string;
  key: string | null;
  data: unknown;
  idempotencyKey: string | null;
  createdAt: string;
  woken: number;
  started: number;
  cancelled: number;
  refused: { task: string; message: string }[];
}

export interface EventPageJson {
  events: EventJson[];
  nextCursor: string | null;
}

type Query = Record<string, string | number | undefined>;

/**
 * A client of the HTTP API at `url`. Typed by the tasks of the deployment it calls:
 * `createClient<typeof tasks>({ url, token })` makes a wrong task name or payload a compile-time error.
 */
export function createClient<Tasks extends TaskList = TaskList>(options: ClientOptions): SkiplockClient<Tasks> {
  const api = transport(options);
  // Methods use no `this`: `const { enqueue } = client` works.
  return {
    ...enqueueMethods<Tasks>(api),
    ...jobMethods(api),
    stats() {
      return api.json<StatsJson>('GET', '/v1/stats');
    },
    ...scheduleMethods<Tasks>(api),
    tick() {
      return api.json<TickResultJson>('POST', '/v1/tick');
    },
    ...eventMethods(api),
    streamJob: (jobId, o) => streamJob(streamTransport(options), jobId, o),
  };
}

function streamTransport(options: ClientOptions) {
  return { base: options.url.replace(/\/+$/, ''), send: options.fetch ?? ((request: Request) => fetch(request)), headers: { ...options.headers, authorization: `Bearer ${options.token}` } };
}

/** How every method calls the API: one request with the token; a refusal thrown as a SkiplockApiError. */
interface Transport {
  call(method: string, path: string, init?: { body?: unknown; query?: Query }): Promise<Response>;
  /** The answer's JSON body. */
  json<T>(method: string, path: string, init?: { body?: unknown; query?: Query }): Promise<T>;
}

function transport(options: ClientOptions): Transport {
  const base = options.url.replace(/\/+$/, '');
  const send = options.fetch ?? ((request: Request) => fetch(request));

  async function call(method: string, path: string, init: { body?: unknown; query?: Query } = {}): Promise<Response> {
    const search = new URLSearchParams();
    for (const [key, value] of Object.entries(init.query ?? {})) if (value !== undefined) search.set(key, String(value));
    const headers: Record<string, string> = { ...options.headers, authorization: `Bearer ${options.token}`, accept: 'application/json' };
    if (init.body !== undefined) headers['content-type'] = 'application/json';
    const query = search.toString() ? `?${search}` : '';
    const request = new Request(`${base}${path}${query}`, {
      method,
      headers,
      ...(init.body !== undefined ? { body: JSON.stringify(init.body) } : {}),
    });
    const response = await send(request);
    if (!response.ok) throw await errorFromResponse(response);
    return response;
  }

  return {
    call,
    async json<T>(method: string, path: string, init?: { body?: unknown; query?: Query }): Promise<T> {
      return (await (await call(method, path, init)).json()) as T;
    },
  };
}

/** undefined for the API's not_found (the thing is missing); any other refusal is thrown. */
async function orUndefined<T>(answer: Promise<T>): Promise<T | undefined> {
  try {
    return await answer;
  } catch (error) {
    if (error instanceof SkiplockApiError && error.code === 'not_found') return undefined;
    throw error;
  }
}

const id = (value: string) => encodeURIComponent(value);

/** POST /v1/jobs and /v1/jobs/batch. */
function enqueueMethods<Tasks extends TaskList>(api: Transport): Pick<SkiplockClient<Tasks>, 'enqueue' | 'enqueueWithResult' | 'enqueueAndWait' | 'enqueueBatch'> {
  async function enqueueWithResult(input: ClientEnqueueInput<Tasks>): Promise<EnqueueResultJson> {
    const response = await api.call('POST', '/v1/jobs', { body: input });
    const { job } = (await response.json()) as { job: JobJson };
    return { job, created: response.status === 201 };
  }

  return {
    async enqueue(input) {
      return (await enqueueWithResult(input)).job;
    },
    enqueueWithResult,
    async enqueueAndWait(input, { waitSeconds }) {
      const response = await api.call('POST', '/v1/jobs', { body: input, query: { wait: waitSeconds } });
      const { job } = (await response.json()) as { job: JobJson };
      return { job, finished: response.status === 200 };
    },
    async enqueueBatch(inputs) {
      return (await api.json<{ jobs: JobJson[] }>('POST', '/v1/jobs/batch', { body: { jobs: inputs } })).jobs;
    },
  };
}

/** The jobs there are: read, list, cancel, retry, restart, in bulk. */
function jobMethods(api: Transport): Pick<SkiplockClient, 'getJob' | 'listJobs' | 'cancelJob' | 'retryJob' | 'restartJob' | 'bulk' | 'retryDead'> {
  return {
    async getJob(jobId) {
      return (await orUndefined(api.json<{ job: JobDetailJson }>('GET', `/v1/jobs/${id(jobId)}`)))?.job;
    },
    listJobs(query = {}) {
      return api.json<JobPageJson>('GET', '/v1/jobs', { query: { ...query } });
    },
    async cancelJob(jobId) {
      const response = await api.call('POST', `/v1/jobs/${id(jobId)}/cancel`);
      const { job } = (await response.json()) as { job: JobJson };
      return { job, outcome: response.status === 202 ? 'requested' : 'cancelled' };
    },
    async retryJob(jobId) {
      return (await api.json<{ job: JobJson }>('POST', `/v1/jobs/${id(jobId)}/retry`)).job;
    },
    async restartJob(jobId, restartOptions = {}) {
      return (await api.json<{ job: JobJson }>('POST', `/v1/jobs/${id(jobId)}/restart`, { body: { fromStep: restartOptions.fromStep ?? null } })).job;
    },
    bulk(input) {
      return api.json<BulkResultJson>('POST', '/v1/jobs/bulk', { body: input });
    },
    async retryDead(retryOptions = {}) {
      return (await api.json<{ retried: number }>('POST', '/v1/jobs/retry-dead', { body: retryOptions })).retried;
    },
  };
}

/** /v1/schedules: list, read, put, delete. */
function scheduleMethods<Tasks extends TaskList>(api: Transport): Pick<SkiplockClient<Tasks>, 'listSchedules' | 'getSchedule' | 'putSchedule' | 'deleteSchedule'> {
  return {
    listSchedules(query = {}) {
      return api.json<SchedulePageJson>('GET', '/v1/schedules', { query: { ...query } });
    },
    async getSchedule(name) {
      return (await orUndefined(api.json<{ schedule: ScheduleJson }>('GET', `/v1/schedules/${id(name)}`)))?.schedule;
    },
    async putSchedule(name, input) {
      const response = await api.call('PUT', `/v1/schedules/${id(name)}`, { body: input });
      const { schedule } = (await response.json()) as { schedule: ScheduleJson };
      return { schedule, created: response.status === 201 };
    },
    async deleteSchedule(name) {
      return (await orUndefined(api.call('DELETE', `/v1/schedules/${id(name)}`))) !== undefined;
    },
  };
}

/** /v1/events: send, list. */
function eventMethods(api: Transport): Pick<SkiplockClient, 'sendEvent' | 'listEvents'> {
  return {
    async sendEvent(input) {
      const response = await api.call('POST', '/v1/events', { body: input });
      return { ...((await response.json()) as Omit<SendEventResultJson, 'created'>), created: response.status === 201 };
    },
    listEvents(query = {}) {
      return api.json<EventPageJson>('GET', '/v1/events', { query: { ...query } });
    },
  };
}
