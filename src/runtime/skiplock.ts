/**
 * The library's entry point: a database, the tasks, and the operations built on them.
 *
 *   const skiplock = createSkiplock({ sql: createNeonHttpDriver(env.DATABASE_URL), tasks: [sendEmail] });
 *   await skiplock.enqueue({ task: 'send-email', payload: { to } });
 *   await skiplock.tick({ budgetMs: 25_000 });
 */
import { SkiplockError } from '../core/errors.ts';
import type { Job, TickResult } from '../core/types.ts';
import type { Clock } from '../store/clock.ts';
import { getJob } from '../store/admin.ts';
import { pruneFinishedJobs } from '../store/retention.ts';
import { reapExpiredLeases } from '../store/leases.ts';
import { msUntilNextWork } from '../store/wakeup.ts';
import { migrate, type Migration, type MigrateResult } from '../store/migrate.ts';
import { mapJob, toBool } from '../store/rows.ts';
import { isNotMigratedText, type SchemaStatus } from '../store/schema.ts';
import { batchDeadlockSafe, type Sql, type Statement } from '../store/sql.ts';
import { createAdminOperations, isJobId, type AdminOperations } from './operations/admin.ts';
import { enqueueJobs, prepareEnqueue, type EnqueueInput, type EnqueueResult } from './tasks/enqueue.ts';
import type { Schedule } from './schedules/definition.ts';
import { createScheduleOperations, msUntilFirstRun, type ScheduleOperations } from './schedules/schedules.ts';
import { createRegistry, type Task, type TaskRegistry } from './tasks/task.ts';
import type { EnqueueInputOf, TaskList } from './tasks/task-types.ts';
import { consoleLog, warnOnceWith, type Logger } from './observability/log.ts';
import { flowLimits } from './flow/keys.ts';
import { createSchemaCheck, isNotMigrated } from './operations/schema-check.ts';
import { createFlowOperations, type FlowOperations } from './flow/status.ts';
import { TICK_DEFAULTS, tick, type TickOptions } from './tick/tick.ts';
import { createTickMetrics, type TickTotals } from './tick/metrics.ts';
import { resolveTracing, type OtelOption } from './observability/tracing.ts';
import { checkWaitMs, waitForJob, type WaitResult } from './tasks/wait-for-job.ts';
import { createRestart, type RestartOptions } from './steps/restart.ts';
import { createBulk, type BulkInput, type BulkResult } from './operations/bulk.ts';
import { createReplayCheck, type CheckReplayInput, type CheckReplayResult } from './steps/replay.ts';
import { createWaker, type TickIfDueOptions, type TickIfDueResult, type WakeDriver } from './wake/wake.ts';
import { DEFAULT_IDLE_CHECK_MS } from './wake/state.ts';
import { createDeploymentWake, type DeploymentOptions } from './wake/deployment.ts';
import { createCallbackSigner, type CallbackOptions } from './events/callback-token.ts';
import { dispatchPendingWith, EVENT_LIMITS, listEventsWith, registrationRows, sendEventWith, subscriptions, type SendEventInput, type SendEventResult, type StoredEvent } from './events/events.ts';
import { completeCallback } from '../store/event-waits.ts';
import { registerTasks } from '../store/event-subscriptions.ts';
import { callbackDataText } from './events/waits.ts';

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
}

export interface EnqueueAndWaitOptions {
  /** How long to wait for the job to finish, in ms (0 to 24 h). Required. */
  timeoutMs: number;
  /**
   * Also start a tick at once (`tick({ untilIdle: true, ...options })`), for when nothing else runs
   * ticks (a script, a test). Its promise is returned as `tick`: on a serverless platform, hand it
   * to waitUntil. Default false: the deployment's ticks run the job.
   */
  tick?: boolean | TickOptions;
}

export interface EnqueueAndWaitResult extends WaitResult {
  /** False when the idempotency key matched an existing job: that job is waited for. */
  created: boolean;
  /** The tick started by the `tick` option. */
  tick?: Promise<TickResult>;
}

export interface RetentionOptions {
  /** Delete DONE jobs finished longer ago than this (ms). Default 7 days. */
  doneMs?: number;
  /** Delete CANCELLED jobs finished longer ago than this (ms). Default 7 days. */
  cancelledMs?: number;
  /** Delete DEAD jobs older than this (ms); null keeps them until a person acts. Default null. */
  deadMs?: number | null;
  /** At most this many rows per call. Default 10 000. */
  limit?: number;
  /** Delete events stored longer ago than this (ms); waits match only events still kept. Default 7 days. */
  eventsMs?: number;
}

const DAY_MS = 24 * 3600 * 1000;
/** Ticks prune finished jobs at most this often per process. */
const PRUNE_INTERVAL_MS = 60_000;


/**
 * Also: listJobs, cancelJob, retryJob, stats, activity, ping (src/runtime/operations/admin.ts); putSchedule,
 * deleteSchedule, listSchedules, getSchedule, fireDueSchedules (src/runtime/schedules/schedules.ts).
 */
export interface Skiplock<Tasks extends TaskList = TaskList> extends AdminOperations, ScheduleOperations, FlowOperations {
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
}

export function createSkiplock<const Tasks extends TaskList>(config: SkiplockConfig<Tasks>): Skiplock<Tasks> {
  const log = config.log ?? consoleLog;
  const unguarded = config.autoMigrate ? migratingFirst(config.sql, config.autoMigrate) : config.sql;
  const schema = createSchemaCheck(unguarded, log);
  // A statement failing on a missing table, function or column becomes not_migrated, with the fix.
  const sql = schema.guard(unguarded);
  const registry = createRegistry(config.tasks);
  const now = (): Clock => config.now?.() ?? null;
  const tickMetrics = createTickMetrics();
  const warnOnce = warnOnceWith(log);
  const staticSchedules = (config.schedules ?? []).map((s) => s.name);
  /** A write's result, after telling the hook when the work it made is due (null: it made none; undefined: now). */
  const after = async <T>(result: T, dueAt: (result: T) => Date | number | null | undefined): Promise<T> => {
    const at = dueAt(result);
    if (at !== null) await dueWork(at);
    return result;
  };
  const schedules = createScheduleOperations({ sql, registry, schedules: config.schedules ?? [], now, log, warnOnce });

  const admin = createAdminOperations(sql, now, registry);
  const restart = createRestart(sql, now, registry);
  const bulk = createBulk(sql, now);
  const tracing = resolveTracing(config.otel);
  const traceparent = async () => (await tracing())?.currentTraceparent();
  const enqueueBatch = async (inputs: readonly EnqueueInput[]) =>
    afterEnqueue(inputs, await enqueueJobs(sql, registry, inputs, now(), { batch: true, traceparent: await traceparent() }));
  const enqueueWithResult = async (input: EnqueueInput) =>
    (await afterEnqueue([input], await enqueueJobs(sql, registry, [input], now(), { traceparent: input.traceparent ?? (await traceparent()) })))[0]!;
  const enqueue = async (input: EnqueueInput) => (await enqueueWithResult(input)).job;
  const readJob = async (id: string) => {
    if (!isJobId(id)) return undefined;
    const [row] = await sql.query(getJob({ id }));
    return row ? mapJob(row) : undefined;
  };
  const callbacks = config.callbacks ? createCallbackSigner(config.callbacks) : undefined;
  // An unmigrated database fails every poll of every tick the same way: said once per instance.
  let notMigratedSaid = false;
  const sayNotMigrated = (text: string) => {
    if (notMigratedSaid) return false;
    notMigratedSaid = true;
    log('error', text);
    return true;
  };
  const tickLog: Logger = (level, message, fields) => {
    const error = fields?.error;
    if (typeof error === 'string' && isNotMigratedText(error)) sayNotMigrated(error.replace(/^SkiplockError: /, ''));
    else log(level, message, fields);
  };
  // Whether a tick of this instance has read (and so written the static definitions of) the schedules.
  let schedulesRead = false;
  const beforeClaim = async () => {
    const fired = await schedules.fireDueSchedules();
    schedulesRead = true;
    return fired;
  };
  // This deployment's tasks and their on: names, registered by the first claim of this instance
  // (or by migrate): how another sender's event finds the jobs it leaves to this deployment.
  let registered = false;
  const registration = { rows: registrationRows(registry), needed: () => !registered, done: () => void (registered = true) };
  const onSubscriptions = subscriptions(registry);
  const events = onSubscriptions === null ? undefined : { subscriptions: onSubscriptions, dispatch: () => dispatchPendingWith(sql, registry, now()) };
  const runTick = async (options?: TickOptions) => {
    const deps = {
      sql, now, log: tickLog, warnOnce, run: { registry, enqueue, callbacks }, beforeClaim, staticSchedules, schedulesRead: () => schedulesRead, housekeeping,
      tracing: await tracing(), registration, ...(events && { events }),
    };
    try {
      return await tickMetrics.measure(() => tick(deps, { ...config.tick, ...options }));
    } catch (error) {
      if (isNotMigrated(error)) sayNotMigrated((error as Error).message);
      throw error;
    }
  };
  const msUntilNext = async (options?: TickOptions) => {
    const { budgetMs, marginMs } = { ...TICK_DEFAULTS, ...config.tick, ...options };
    const rows = await sql.query(
      msUntilNextWork({
        now: now(), tasks: [...registry.keys()], budgetMs: budgetMs - marginMs, schedules: staticSchedules, flowLimits: flowLimits(registry), retention: retentionWake(),
        subscriptions: onSubscriptions,
      }),
    );
    // Work and stored next runs come as one figure; schedules put since the last tick, one row each.
    const ms = rows.map((row) => (toBool(row.uncomputed) ? msUntilFirstRun(row) : row.ms === null || row.ms === undefined ? null : Number(row.ms)));
    return ms.reduce<number | null>((a, b) => (b === null ? a : a === null ? b : Math.min(a, b)), null);
  };
  let driver: WakeDriver = config.wake ?? {};
  const idleCheckMs = config.idleCheckMs ?? DEFAULT_IDLE_CHECK_MS;
  if (!Number.isInteger(idleCheckMs) || idleCheckMs < 0) throw new TypeError(`idleCheckMs must be an integer ≥ 0, got ${String(config.idleCheckMs)}`);
  const remote = config.deployment === undefined ? undefined : createDeploymentWake(config.deployment, log);
  const waker = createWaker({ driver: () => driver, idleCheckMs, log, tick: runTick, dueInMs: msUntilNext, ...(remote && { remote }) });
  /**
   * The one hook: every write that creates or moves due work calls it, with the instant it is due.
   * It waits only for the `deployment` wake request (bounded by its timeout), not for a local tick.
   */
  const dueWork = (at?: Date | number) => waker.afterWrite(at);
  const afterEnqueue = async (inputs: readonly EnqueueInput[], results: EnqueueResult[]) => {
    const due = inputs.flatMap((input, i) => (results[i]?.created || input.debounce ? [dueAtOf(input)] : []));
    if (due.length > 0) await dueWork(Math.min(...due));
    return results;
  };

  const prune = async (options: RetentionOptions = {}) => {
    const [row] = await sql.query(
      pruneFinishedJobs({
        now: now(),
        doneMs: options.doneMs ?? 7 * DAY_MS,
        cancelledMs: options.cancelledMs ?? 7 * DAY_MS,
        deadMs: options.deadMs ?? null,
        limit: options.limit ?? 10_000,
        eventsMs: options.eventsMs ?? EVENT_LIMITS.retentionMs,
      }),
    );
    return Number(row?.deleted ?? 0) + Number(row?.deleted_events ?? 0);
  };
  // Retention by the ticks themselves, at most once a minute per process: serverless deployments
  // run nothing else. (A local rate limit only; the ages are measured in SQL.)
  let lastPrune = -Infinity;
  const retention = config.retention;
  // The next retention pass, for the wake state: what prune() deletes, not before the rate limit allows.
  const retentionWake = () =>
    retention === false
      ? null
      : {
          doneMs: retention?.doneMs ?? 7 * DAY_MS,
          cancelledMs: retention?.cancelledMs ?? 7 * DAY_MS,
          deadMs: retention?.deadMs ?? null,
          retentionWaitMs: Math.max(0, Math.ceil(lastPrune + PRUNE_INTERVAL_MS - performance.now())),
        };
  const housekeeping =
    retention === false
      ? undefined
      : async () => {
          if (performance.now() - lastPrune < PRUNE_INTERVAL_MS) return false;
          lastPrune = performance.now();
          await prune(retention);
          return true;
        };
  return {
    sql,
    tasks: registry,
    schedules: config.schedules ?? [],
    enqueue,
    enqueueWithResult,
    enqueueBatch,
    async enqueueAndWait(input, options) {
      const timeoutMs = checkWaitMs(options?.timeoutMs);
      const { job, created } = await enqueueWithResult(input);
      const started = options.tick ? waker.tick({ untilIdle: true, ...(options.tick === true ? {} : options.tick) }) : undefined;
      started?.catch((error: unknown) => log('error', 'the tick started by enqueueAndWait failed', { error: String(error) }));
      const waited = await waitForJob(job, timeoutMs, { read: () => readJob(job.id) });
      return { ...waited, created, ...(started && { tick: started }) };
    },
    async waitForJob(id, options) {
      const timeoutMs = checkWaitMs(options?.timeoutMs);
      const job = await readJob(id);
      return job && waitForJob(job, timeoutMs, { read: () => readJob(id) });
    },
    // A tick the wake state did not decide concludes into it (wake.ts): what it leaves due is heard.
    tick: (options) => waker.tick(options ?? {}),
    // Reaped jobs are due now (run_at = now()).
    async reap() {
      const [row] = await sql.query(reapExpiredLeases({ now: now(), limit: 10_000 }));
      return after(Number(row?.reaped ?? 0), (n) => (n > 0 ? undefined : null));
    },
    prune,
    msUntilNextWork: msUntilNext,
    wake: (at) => {
      if (at !== undefined && !(at instanceof Date && Number.isFinite(at.getTime())))
        return Promise.reject(new SkiplockError('invalid_request', 'wake: at must be a valid Date', [{ path: ['at'], message: 'must be a valid instant' }]));
      return waker.dueWork(at);
    },
    tickIfDue: waker.tickIfDue,
    setWakeDriver(next) {
      driver = next;
    },
    getJob: readJob,
    enqueueStatement: (input) => {
      // { text, values } for the caller's own transaction, without the hint for skiplock's drivers.
      const { text, values } = prepareEnqueue(registry, [input], now())!.statement;
      return { text, values };
    },
    async migrate(migrations) {
      const result = await migrate(config.sql, migrations);
      // Registered as soon as the schema can hold it: a send right after a deploy's migrate finds this deployment's on: tasks.
      if (registry.size > 0 && registration.needed()) {
        await config.sql.query(registerTasks({ now: now(), tasks: registration.rows })).then(
          registration.done,
          (error: unknown) => log('warn', 'registering the tasks failed; the first tick registers them', { error: String(error) }),
        );
      }
      return result;
    },
    ensureSchema: schema.ensure,
    schemaStatus: schema.status,
    tickTotals: tickMetrics.totals,
    ...admin,
    // A send that woke or started jobs (or asked RUNNING ones to stop), or left on: jobs for the
    // deployment that defines them (pending), makes due work now.
    sendEvent: async (input) =>
      after(await sendEventWith(sql, registry, now(), input, await traceparent()), (r) => (r.woken + r.started + r.cancelled + r.pending > 0 ? undefined : null)),
    listEvents: (query = {}) => listEventsWith(sql, query),
    isCallbackToken: async (token) => typeof token === 'string' && (await callbacks?.verify(token)) != null,
    async completeCallback(token, data) {
      const named = typeof token === 'string' ? await callbacks?.verify(token) : null;
      if (!named) return 'unknown';
      const text = callbackDataText(data);
      // Its write locks the step, then the job; a restart locks the job, then its steps: on a deadlock, sent again.
      const [answer] = await batchDeadlockSafe(sql, [completeCallback({ now: now(), jobId: named.jobId, id: named.stepId, data: text })]);
      const row = answer?.[0];
      if (Number(row?.completed ?? 0) === 1) return after('completed' as const, () => undefined);
      return row?.status === null || row?.status === undefined ? 'unknown' : 'used';
    },
    ...createReplayCheck(sql, registry),
    ...createFlowOperations(sql, registry, now),
    ...schedules,
    // Writes that create or move due work, through the hook. (Other operations that do: add them here.)
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

/**
 * When an enqueue's job becomes due, on the platform's clock: the caller's runAt, or now + its
 * delay (a debounce: at most its maxDelayMs, so never later than the job).
 */
function dueAtOf(input: { runAt?: Date | string | undefined; delayMs?: number | undefined; debounce?: { delayMs: number; maxDelayMs?: number | undefined } | undefined }): number {
  if (input.runAt !== undefined) return new Date(input.runAt).getTime();
  const delay = input.debounce ? Math.min(input.debounce.delayMs, input.debounce.maxDelayMs ?? Infinity) : (input.delayMs ?? 0);
  return Date.now() + delay;
}

/**
 * The Sql port, with the migrations applied before its first statement (autoMigrate).
 * One attempt at a time per instance; a failed attempt is retried by the next statement.
 */
function migratingFirst(sql: Sql, migrations: readonly Migration[]): Sql {
  let ready: Promise<unknown> | undefined;
  const migrated = () => {
    ready ??= migrate(sql, migrations).catch((error: unknown) => {
      ready = undefined;
      throw error;
    });
    return ready;
  };
  return {
    async query(statement) {
      await migrated();
      return sql.query(statement);
    },
    async batch(statements) {
      await migrated();
      return sql.batch(statements);
    },
    close: () => sql.close(),
  };
}

