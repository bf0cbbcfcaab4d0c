/**
 * The library's entry point: a database, the tasks, and the operations built on them.
 *
 *   const skiplock = createSkiplock({ sql: createNeonHttpDriver(env.DATABASE_URL), tasks: [sendEmail] });
 *   await skiplock.enqueue({ task: 'send-email', payload: { to } });
 *   await skiplock.tick({ budgetMs: 25_000 });
 *
 * createSkiplock is the list of the capabilities it composes, each built by its own module from
 * one context (context.ts: the Sql port, the registry, the clock, the log, the due-work hook):
 * enqueueing (tasks/), the ticks (tick/) and when they run (wake/), events (events/), schedules
 * (schedules/), operating the queue and its upkeep (operations/), restart and the replay check
 * (steps/), flow control (flow/). Then the writes that make due work tell the hook (dueWorkWrites).
 */
import type { Job, TickResult } from '../core/types.ts';
import type { Migration, MigrateResult } from '../store/migrate.ts';
import type { SchemaStatus } from '../store/schema.ts';
import type { Sql, Statement } from '../store/sql.ts';
import { createContext, type SkiplockContext } from './context.ts';
import { createAdminOperations, type AdminOperations } from './operations/admin.ts';
import { createMaintenance, type RetentionOptions } from './operations/maintenance.ts';
import { createMigrate, migratingFirst } from './operations/migrations.ts';
import { readJob } from './operations/read-jobs.ts';
import { createSchemaCheck } from './operations/schema-check.ts';
import { createBulk, type BulkInput, type BulkResult } from './operations/bulk.ts';
import type { EnqueueResult } from './tasks/enqueue.ts';
import { createEnqueueOperations, dueAtOf, type EnqueueAndWaitOptions, type EnqueueAndWaitResult } from './tasks/enqueue-operations.ts';
import type { TaskRegistry } from './tasks/task.ts';
import type { EnqueueInputOf, TaskList } from './tasks/task-types.ts';
import type { WaitResult } from './tasks/wait-for-job.ts';
import type { Schedule } from './schedules/definition.ts';
import { createScheduleOperations, type ScheduleOperations } from './schedules/schedules.ts';
import { consoleLog, type Logger } from './observability/log.ts';
import type { OtelOption } from './observability/tracing.ts';
import { createFlowOperations, type FlowOperations } from './flow/status.ts';
import { createFairnessOperations, type FairnessOperations } from './flow/fairness.ts';
import type { TickOptions } from './tick/options.ts';
import type { TickTotals } from './tick/metrics.ts';
import { createTickRunner } from './tick/runner.ts';
import { createRestart, type RestartOptions } from './steps/restart.ts';
import { createReplayCheck, type CheckReplayInput, type CheckReplayResult } from './steps/replay.ts';
import type { TickIfDueOptions, TickIfDueResult, WakeDriver } from './wake/wake.ts';
import type { DeploymentOptions } from './wake/deployment.ts';
import { createNextWork } from './wake/next-work.ts';
import { createWakeOperations } from './wake/operations.ts';
import { createCallbackSigner, type CallbackOptions } from './events/callback-token.ts';
import type { SendEventInput, SendEventResult, StoredEvent } from './events/events.ts';
import { createEventDispatch, createEventOperations, createRegistration } from './events/operations.ts';
import { readStreamWith, type ReadStreamOptions, type ReadStreamResult } from './streams/read.ts';
import { createStreamTokenSigner, streamTokensNotConfigured, type StreamTokenOptions } from './streams/token.ts';

export type { Logger };

export interface SkiplockConfig<Tasks extends TaskList = TaskList> {
  /** The database port: createPgDriver, createNeonHttpDriver or createNeonWsDriver. */
  sql: Sql;
  /**
   * Every task this deployment can run; enqueueing any other task is refused — at compile time
   * too: enqueue's input is checked against these tasks' names and payload schemas.
   */
  tasks: Tasks;
  /**
   * Opt-in: applies these migrations before the first statement this instance runs — pass the
   * packaged ones, `import { migrations } from 'skiplock/migrations'`. Once per instance;
   * concurrent instances serialize on an advisory lock, as `migrate()` does. Costs two round trips
   * on a cold start once the schema is current. (Data, not `true`, so that a bundle that does not
   * use it carries no SQL: 3.7 KiB gzipped.) Default: none — run `npx skiplock migrate` or
   * `skiplock.migrate(migrations)` from a deploy step instead.
   */
  autoMigrate?: readonly Migration[];
  /**
   * Static schedules (defineSchedule), fired by every tick. Each must name a task above; its
   * payload is checked against that task now (TypeError when it does not fit). Default none.
   */
  schedules?: readonly Schedule[];
  /** Defaults for every tick, overridable per call. */
  tick?: TickOptions;
  /**
   * How long finished jobs are kept. Ticks prune by themselves, at most once a minute per process
   * (serverless deployments run nothing else); `false` leaves it to you (`prune()`). Default: DONE
   * and CANCELLED 7 days, DEAD until a person acts.
   */
  retention?: RetentionOptions | false;
  /** Where warnings go (stale writes, failed statements). Default: console. */
  log?: Logger;
  /**
   * The clock passed into SQL. Default: the database's now(). Tests pass instants in instead of
   * waiting; production never sets it (one clock: the database's).
   */
  now?: () => Date | null;
  /**
   * The longest an idle deployment goes without looking at the database, in ms: the safety check
   * that finds work written behind skiplock's back (SQL, another service, `enqueueStatement`)
   * without a `wake()`. A cron or alarm invocation between due instants makes no statement.
   * `0` never checks. Platform entry points read IDLE_CHECK_MS. Default 3 600 000 (one hour); createWorker's
   * with the Durable Object: a day (DURABLE_IDLE_CHECK_MS).
   */
  idleCheckMs?: number;
  /**
   * How this platform keeps the wake state and starts a tick in the background (src/runtime/wake/wake.ts).
   * Platform entry points set it (setWakeDriver); default: memory, and no background tick.
   */
  wake?: WakeDriver;
  /**
   * A deployment this process writes jobs for but does not run (a web service beside a worker, a
   * script, the CLI): after each write that creates or moves due work, and on `wake()`, an
   * authenticated `POST {url}/v1/wake` with `{ at }` wakes it (src/runtime/wake/deployment.ts).
   * `url`: its base URL, where `/v1/wake` is (http or https); `token`: its API_TOKEN (≥ 16
   * characters). One request per earlier instant (a burst or a batch: one or two); a write waits
   * for its request at most `timeoutMs` (default 1500); a failure is logged, never thrown. Default
   * none: only this process's own wake state is lowered.
   */
  deployment?: DeploymentOptions;
  /**
   * OpenTelemetry: the `@opentelemetry/api` module (`import * as otel from '@opentelemetry/api'`).
   * Enqueues store the active trace context, and each attempt runs in a span under it. Default:
   * imported lazily if installed (Node); a Worker bundle passes it, since a bundler cannot see a
   * lazy import. `false` turns tracing off.
   */
  otel?: OtelOption;
  /**
   * Callback URLs (ctx.createCallback): the HMAC secret of their tokens and the public base URL
   * they start with (src/runtime/events/callback-token.ts). Default: none — ctx.createCallback fails.
   */
  callbacks?: CallbackOptions;
  /**
   * Stream read tokens (skiplock.streamToken): the HMAC secret they are signed with
   * (src/runtime/streams/token.ts). Default: `callbacks.secret`; without either, streamToken fails.
   */
  streamTokens?: StreamTokenOptions;
}

/**
 * Also: listJobs, cancelJob, retryJob, stats, activity, ping (src/runtime/operations/admin.ts, and the groups it lists); putSchedule,
 * deleteSchedule, listSchedules, getSchedule, fireDueSchedules (src/runtime/schedules/schedules.ts).
 */
export interface Skiplock<Tasks extends TaskList = TaskList> extends AdminOperations, ScheduleOperations, FlowOperations, FairnessOperations {
  readonly sql: Sql;
  readonly tasks: TaskRegistry;
  /** The static schedules this instance fires (the `schedules` option). */
  readonly schedules: readonly Schedule[];
  /** Validates and enqueues one job; the same idempotency key returns the original job. */
  enqueue(input: EnqueueInputOf<Tasks>): Promise<Job>;
  /** Like enqueue, and also says whether the job was created or is an idempotency-key replay. */
  enqueueWithResult(input: EnqueueInputOf<Tasks>): Promise<EnqueueResult>;
  /**
   * Enqueues one job and waits for its result, polling its row (50 ms, backing off to 500 ms):
   * `finished` true with the job DONE, DEAD or CANCELLED, or false with the job as it is when
   * `timeoutMs` runs out. A replay of an idempotency key waits for the original job.
   */
  enqueueAndWait(input: EnqueueInputOf<Tasks>, options: EnqueueAndWaitOptions): Promise<EnqueueAndWaitResult>;
  /**
   * Waits up to `timeoutMs` for a job to finish (see enqueueAndWait): `{ job, finished }`, with
   * `finished` true once the job is DONE, DEAD or CANCELLED and false with the job as last read
   * when the time ran out; undefined when there is no such job. It never throws for a DEAD job.
   */
  waitForJob(id: string, options: { timeoutMs: number }): Promise<WaitResult | undefined>;
  /** Validates every job, then enqueues all or none, in one statement. */
  enqueueBatch(inputs: readonly EnqueueInputOf<Tasks>[]): Promise<EnqueueResult[]>;
  /**
   * The enqueue of one job as a statement `{ text, values }`, validated exactly like `enqueue`
   * (SkiplockError when it is not valid), for the caller to run in their own transaction: the job
   * exists if and only if that transaction commits. Same idempotency-key behaviour as enqueue (a
   * replay inserts nothing; the statement returns the original row). It runs no tick: the job
   * starts at the next one. Neon HTTP: `sql.transaction([..., sql.query(text, values)])`; pg or
   * the Neon Pool: `client.query(text, values)` between BEGIN and COMMIT. The row it returns is
   * raw (snake_case): `jobFromRow(row)` maps it to a Job.
   */
  enqueueStatement(input: EnqueueInputOf<Tasks>): Statement;
  /** Runs one tick (see TickOptions). */
  tick(options?: TickOptions): Promise<TickResult>;
  /**
   * Work written behind this deployment's back (your own transaction with `enqueueStatement`,
   * another service, SQL) may be due at `at` (default now): lowers the wake state and starts a
   * tick (or a wake-up at `at`) as an enqueue does. Resolves once the platform has it.
   */
  wake(at?: Date): Promise<void>;
  /**
   * What a cron, an alarm or a timer runs: when the wake state says something is due (or the last
   * database check is `idleCheckMs` old, or the state is unknown), ticks until idle and writes
   * the wake state the database reports; otherwise makes no statement and returns at once.
   */
  tickIfDue(options?: TickIfDueOptions): Promise<TickIfDueResult>;
  /** For platform entry points: where the wake state lives and how a tick starts in the background. */
  setWakeDriver(driver: WakeDriver): void;
  /** Returns RUNNING jobs whose lease expired to the queue; resolves to how many. */
  reap(): Promise<number>;
  /**
   * Milliseconds until a tick with these options could next do something (a claimable job falls
   * due; 0 while one of its tasks' jobs runs; a schedule it fires is next due); null when there is
   * nothing to wait for. For
   * self-scheduling tickers (the Durable Object alarm).
   */
  msUntilNextWork(options?: TickOptions): Promise<number | null>;
  /** Deletes finished jobs past their retention; resolves to how many. */
  prune(options?: RetentionOptions): Promise<number>;
  getJob(id: string): Promise<Job | undefined>;
  /**
   * Applies pending migrations: `skiplock.migrate(migrations)` with the ones this package ships
   * (`import { migrations } from 'skiplock/migrations'`). Safe to run from several places at once
   * (an advisory lock serializes them).
   */
  migrate(migrations: readonly Migration[]): Promise<MigrateResult>;
  /** What every tick of this isolate did so far, for /metrics (in memory; zero at start). */
  tickTotals(): TickTotals;
  /**
   * Restarts a job from one of its steps (docs/steps.md, "Changing a workflow's code"): keeps the
   * steps recorded before `fromStep`, forgets it and the rest, and queues the job, due now, with
   * fresh attempts. For a DEAD or CANCELLED job; the children of forgotten invokes are cancelled.
   * not_found (no such job or step), conflict for a live job (QUEUED — one already restarted
   * among them —, WAITING, RUNNING: cancel it first) or a DONE one.
   */
  restartJob(id: string, options?: RestartOptions): Promise<Job>;
  /**
   * Retries, cancels, restarts or deletes every job a filter matches, in chunks of 1000 ids, each
   * changed like a person's single action, the filter checked again as it changes them
   * (docs/operations.md, "Bulk operations"); the same call twice changes nothing the second time:
   * `bulk({ action: 'retry', where: { task: 'charge', status: 'DEAD', errorContains: 'ECONNRESET' } })`
   * → `{ matched, changed }`; with `dryRun`, `{ matched, changed: 0, wouldChange }`.
   */
  bulk(input: BulkInput): Promise<BulkResult>;
  /**
   * The replay check (docs/steps.md, "Changing a workflow's code"): runs this deployment's handlers
   * against the recorded steps of in-flight and recent jobs, running no step function and writing
   * nothing, and lists each job whose next run would fail, and why. For CI before a deploy.
   */
  checkReplay(input?: CheckReplayInput): Promise<CheckReplayResult>;
  /**
   * Rejects with SkiplockError `not_migrated` (naming `npx skiplock migrate` and `autoMigrate`)
   * while the database lacks a migration this skiplock ships. One statement per instance once the
   * schema is current (read again only after a statement fails on a missing table or column).
   */
  ensureSchema(): Promise<void>;
  /** The database's schema against this skiplock's: applied, expected, missing (one statement). */
  schemaStatus(): Promise<SchemaStatus>;
  /**
   * Sends an event (docs/steps.md, "Events"), in one transaction: stores it, completes every
   * ctx.waitForEvent waiting for it (their jobs due now), starts the jobs of the tasks defined with
   * `on:` its name, and cancels the jobs whose cancelOn it matches. The same idempotencyKey again
   * answers the first send's result (`created` false) and writes nothing. SkiplockError
   * invalid_request for a bad name, key or data (nothing written).
   */
  sendEvent(input: SendEventInput): Promise<SendEventResult>;
  /** Stored events, newest first (`cursor`: the last page's nextCursor). */
  listEvents(query?: { name?: string; key?: string; cursor?: string; limit?: number }): Promise<{ events: StoredEvent[]; nextCursor: string | null }>;
  /**
   * A POST to a callback URL: `token` is the URL's last segment. `completed` (its job wakes with
   * `{ data }`), `used` (already completed, or timed out: nothing written), or `unknown` (a wrong
   * token, or no such callback). Checked after the token, writing nothing and leaving the
   * callback open: data over one step's output limit (256 KiB of JSON) is refused (SkiplockError
   * payload_too_large), and data that JSON or PostgreSQL cannot hold — a NUL or a lone surrogate
   * in a string or a key — too (SkiplockError invalid_request).
   */
  completeCallback(token: string, data: unknown): Promise<'completed' | 'used' | 'unknown'>;
  /**
   * Whether `token` (a callback URL's last segment) was signed by this deployment: its HMAC
   * checks out. Reads and writes nothing; the HTTP API asks it before reading a callback's body.
   */
  isCallbackToken(token: string): Promise<boolean>;
  /**
   * A page of a job's stream (ctx.stream, docs/streams.md), in one statement: its chunks after
   * `after` (a seq; default 0) in order — at most `limit` (default 100, at most 1000) and about
   * 1 MiB of JSON — and `done`, true once the job is finished and the page ends with its last
   * chunk. SkiplockError invalid_request for a bad id or option, not_found for no such job.
   */
  readStream(jobId: string, options?: ReadStreamOptions): Promise<ReadStreamResult>;
  /**
   * A read token for one job's streams (docs/streams.md), for a browser's EventSource: accepted
   * as `?token=` by `GET /v1/jobs/{jobId}/stream` only, for that job only, until it expires
   * (`ttlMs`: default one hour, 1 s to 24 h). HMAC-signed with `streamTokens.secret` (default
   * `callbacks.secret`); no statement, so it does not check that the job exists. SkiplockError
   * invalid_request for a bad id or ttlMs; a TypeError when no secret is configured.
   */
  streamToken(jobId: string, options?: { ttlMs?: number }): Promise<string>;
  /** @internal The job a stream token names while it is valid, or null (the HTTP API's check). */
  verifyStreamToken(token: string): Promise<{ jobId: string; expiresAt: Date } | null>;
  /** What this instance's runs did with streams so far, for /metrics (in memory; zero at start). */
  streamTotals(): { chunksWritten: number };
}

export function createSkiplock<const Tasks extends TaskList>(config: SkiplockConfig<Tasks>): Skiplock<Tasks> {
  const log = config.log ?? consoleLog;
  const unguarded = config.autoMigrate ? migratingFirst(config.sql, config.autoMigrate) : config.sql;
  const schema = createSchemaCheck(unguarded, log);
  const ctx = createContext({
    // A statement failing on a missing table, function or column becomes not_migrated, with the fix.
    sql: schema.guard(unguarded), tasks: config.tasks, log, now: config.now, otel: config.otel,
    // The one hook: every write that creates or moves due work calls it (the waker, built below).
    dueWork: (at) => wake.afterWrite(at),
  });
  const staticSchedules = (config.schedules ?? []).map((s) => s.name);
  const schedules = createScheduleOperations({ ...ctx, schedules: config.schedules ?? [] });
  const admin = createAdminOperations(ctx);
  const callbacks = config.callbacks ? createCallbackSigner(config.callbacks) : undefined;
  const streamSecret = config.streamTokens ?? (config.callbacks && { secret: config.callbacks.secret });
  const streamTokens = streamSecret ? createStreamTokenSigner(streamSecret) : undefined;
  const streamTotals = { chunksWritten: 0 };
  const registration = createRegistration(ctx);
  const eventDispatch = createEventDispatch(ctx);
  const maintenance = createMaintenance(ctx, config.retention);
  const enqueue = createEnqueueOperations(ctx, (options) => wake.operations.tick(options));
  const ticks = createTickRunner(ctx, {
    defaults: config.tick, run: { registry: ctx.registry, enqueue: enqueue.enqueue, callbacks, streamChunksWritten: (n) => void (streamTotals.chunksWritten += n) }, registration, events: eventDispatch, housekeeping: maintenance.housekeeping,
    schedules: { names: staticSchedules, fireDue: schedules.fireDueSchedules },
  });
  const msUntilNextWork = createNextWork(ctx, { defaults: config.tick, staticSchedules, nextRetention: maintenance.nextRetention, subscriptions: eventDispatch?.subscriptions ?? null });
  const wake = createWakeOperations(ctx, config, { tick: ticks.run, dueInMs: msUntilNextWork });
  return {
    sql: ctx.sql,
    tasks: ctx.registry,
    schedules: config.schedules ?? [],
    ...enqueue,
    ...wake.operations,
    msUntilNextWork,
    tickTotals: ticks.totals,
    reap: maintenance.reap,
    prune: maintenance.prune,
    getJob: (id) => readJob(ctx.sql, id),
    readStream: (jobId, options) => readStreamWith(ctx.sql, jobId, options),
    streamToken: async (jobId, options) => {
      if (!streamTokens) throw streamTokensNotConfigured();
      return streamTokens.sign(jobId, options);
    },
    verifyStreamToken: async (token) => (streamTokens ? streamTokens.verify(token) : null),
    streamTotals: () => ({ ...streamTotals }),
    migrate: createMigrate(ctx, config.sql, registration),
    ensureSchema: schema.ensure,
    schemaStatus: schema.status,
    ...admin,
    ...createEventOperations(ctx, callbacks),
    ...createReplayCheck(ctx.sql, ctx.registry),
    ...createFlowOperations(ctx.sql, ctx.registry, ctx.now),
    ...createFairnessOperations(ctx.sql, ctx.now),
    ...schedules,
    ...dueWorkWrites(ctx, { admin, schedules, restart: createRestart(ctx.sql, ctx.now, ctx.registry), bulk: createBulk(ctx.sql, ctx.now) }),
  };
}

/**
 * Writes that create or move due work, through the hook: each answers once it has told the hook
 * when the work it made is due. (Other operations that do: add them here.)
 */
function dueWorkWrites(
  { after }: SkiplockContext,
  ops: { admin: AdminOperations; schedules: ScheduleOperations; restart: ReturnType<typeof createRestart>; bulk: ReturnType<typeof createBulk> },
): Pick<Skiplock, 'retryJob' | 'cancelJob' | 'restartJob' | 'bulk' | 'retryDead' | 'rescheduleJob' | 'resumeTask' | 'putSchedule' | 'fireDueSchedules'> {
  const { admin, schedules, restart, bulk } = ops;
  return {
    retryJob: async (id) => after(await admin.retryJob(id), () => undefined),
    // A cancelled child can end its WAITING parent's wait: the parent is due now.
    cancelJob: async (id) => after(await admin.cancelJob(id), (r) => (r.outcome === 'cancelled' && r.job.parentId !== null ? undefined : null)),
    restartJob: async (id, options) => after(await restart.restartJob(id, options), () => undefined),
    // A retry or restart queues jobs due now; a cancel can end a WAITING parent's wait (due now too).
    bulk: async (input) => after(await bulk.bulk(input), (r) => (r.changed > 0 && !input.dryRun && input.action !== 'delete' ? undefined : null)),
    retryDead: async (options) => after(await admin.retryDead(options), (n) => (n > 0 ? undefined : null)),
    rescheduleJob: async (id, input) => after(await admin.rescheduleJob(id, input), () => (input.runAt === undefined && input.delayMs === undefined ? null : dueAtOf(input))),
    resumeTask: async (name) => after(await admin.resumeTask(name), (info) => (info.counts.QUEUED > 0 ? undefined : null)),
    putSchedule: async (name, input) => after(await schedules.putSchedule(name, input), () => undefined),
    // Run alone (a tick fires through beforeClaim, and concludes): the jobs it fires are due now.
    fireDueSchedules: async () => after(await schedules.fireDueSchedules(), (n) => (n > 0 ? undefined : null)),
  };
}
