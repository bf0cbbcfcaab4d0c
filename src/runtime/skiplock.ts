/**
 * The library's entry point: a database, the tasks, and the operations built on them.
 *
 *   const skiplock = createSkiplock({ sql: createNeonHttpDriver(env.DATABASE_URL), tasks: [sendEmail] });
 *   await skiplock.enqueue({ task: 'send-email', payload: { to } });
 *   await skiplock.tick({ budgetMs: 25_000 });
 */
import type { Job, TickResult } from '../core/types.ts';
import type { Clock } from '../store/clock.ts';
import { getJob, pruneFinishedJobs, reapExpiredLeases } from '../store/jobs.ts';
import { msUntilNextWork } from '../store/wakeup.ts';
import { migrate, type Migration, type MigrateResult } from '../store/migrate.ts';
import { mapJob, toBool } from '../store/rows.ts';
import type { Sql } from '../store/sql.ts';
import { createAdminOperations, isJobId, type AdminOperations } from './admin.ts';
import { enqueueJobs, type EnqueueInput, type EnqueueResult } from './enqueue.ts';
import type { Schedule } from './schedule-definition.ts';
import { createScheduleOperations, msUntilFirstRun, type ScheduleOperations } from './schedules.ts';
import { createRegistry, type Task, type TaskRegistry } from './task.ts';
import { consoleLog, warnOnceWith, type Logger } from './log.ts';
import { flowLimits } from './flow-key.ts';
import { createFlowOperations, type FlowOperations } from './flow-status.ts';
import { TICK_DEFAULTS, tick, type TickOptions } from './tick.ts';
import { createTickMetrics, type TickTotals } from './tick-metrics.ts';

export type { Logger };

export interface SkiplockConfig {
  /** The database port: createPgDriver, createNeonHttpDriver or createNeonWsDriver. */
  sql: Sql;
  /** Every task this deployment can run; enqueueing any other task is refused. */
  tasks: readonly Task[];
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
}

const DAY_MS = 24 * 3600 * 1000;
/** Ticks prune finished jobs at most this often per process. */
const PRUNE_INTERVAL_MS = 60_000;


/**
 * Also: listJobs, cancelJob, retryJob, stats, activity, ping (src/runtime/admin.ts); putSchedule,
 * deleteSchedule, listSchedules, getSchedule, fireDueSchedules (src/runtime/schedules.ts).
 */
export interface Skiplock extends AdminOperations, ScheduleOperations, FlowOperations {
  readonly sql: Sql;
  readonly tasks: TaskRegistry;
  /** Validates and enqueues one job; the same idempotency key returns the original job. */
  enqueue(input: EnqueueInput): Promise<Job>;
  /** Like enqueue, and also says whether the job was created or is an idempotency-key replay. */
  enqueueWithResult(input: EnqueueInput): Promise<EnqueueResult>;
  /** Validates every job, then enqueues all or none, in one statement. */
  enqueueBatch(inputs: readonly EnqueueInput[]): Promise<EnqueueResult[]>;
  /** Runs one tick (see TickOptions). */
  tick(options?: TickOptions): Promise<TickResult>;
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
  /** Applies pending migrations (Node: `loadMigrations()` from skiplock/migrations-fs). */
  migrate(migrations: readonly Migration[]): Promise<MigrateResult>;
  /** What every tick of this isolate did so far, for /metrics (in memory; zero at start). */
  tickTotals(): TickTotals;
}

export function createSkiplock(config: SkiplockConfig): Skiplock {
  const { sql } = config;
  const registry = createRegistry(config.tasks);
  const now = (): Clock => config.now?.() ?? null;
  const log = config.log ?? consoleLog;
  const tickMetrics = createTickMetrics();
  const warnOnce = warnOnceWith(log);
  const staticScheduleNames = (config.schedules ?? []).map((s) => s.name);
  const schedules = createScheduleOperations({ sql, registry, schedules: config.schedules ?? [], now, log, warnOnce });

  const enqueueBatch = (inputs: readonly EnqueueInput[]) => enqueueJobs(sql, registry, inputs, now(), { batch: true });
  const enqueueWithResult = async (input: EnqueueInput) => (await enqueueJobs(sql, registry, [input], now()))[0]!;
  const enqueue = async (input: EnqueueInput) => (await enqueueWithResult(input)).job;

  const prune = async (options: RetentionOptions = {}) => {
    const [row] = await sql.query(
      pruneFinishedJobs({
        now: now(),
        doneMs: options.doneMs ?? 7 * DAY_MS,
        cancelledMs: options.cancelledMs ?? 7 * DAY_MS,
        deadMs: options.deadMs ?? null,
        limit: options.limit ?? 10_000,
      }),
    );
    return Number(row?.deleted ?? 0);
  };
  // Retention by the ticks themselves, at most once a minute per process: serverless deployments
  // run nothing else. (A local rate limit only; the ages are measured in SQL.)
  let lastPrune = -Infinity;
  const retention = config.retention;
  const housekeeping =
    retention === false
      ? undefined
      : async () => {
          if (performance.now() - lastPrune < PRUNE_INTERVAL_MS) return false;
          lastPrune = performance.now();
          await prune(retention);
          return true;
        };
  const staticSchedules = (config.schedules ?? []).map((schedule) => schedule.name);

  return {
    sql,
    tasks: registry,
    enqueue,
    enqueueWithResult,
    enqueueBatch,
    tick: (options) =>
      tickMetrics.measure(() => tick({ sql, now, log, warnOnce, run: { registry, enqueue }, beforeClaim: schedules.fireDueSchedules, staticSchedules, housekeeping }, { ...config.tick, ...options })),
    async reap() {
      const [row] = await sql.query(reapExpiredLeases({ now: now(), limit: 10_000 }));
      return Number(row?.reaped ?? 0);
    },
    prune,
    async msUntilNextWork(options) {
      const { budgetMs, marginMs } = { ...TICK_DEFAULTS, ...config.tick, ...options };
      const rows = await sql.query(msUntilNextWork({ now: now(), tasks: [...registry.keys()], budgetMs: budgetMs - marginMs, schedules: staticScheduleNames, flowLimits: flowLimits(registry) }));
      // Work and stored next runs come as one figure; schedules put since the last tick, one row each.
      const ms = rows.map((row) => (toBool(row.uncomputed) ? msUntilFirstRun(row) : row.ms === null || row.ms === undefined ? null : Number(row.ms)));
      return ms.reduce<number | null>((a, b) => (b === null ? a : a === null ? b : Math.min(a, b)), null);
    },
    async getJob(id) {
      if (!isJobId(id)) return undefined;
      const [row] = await sql.query(getJob({ id }));
      return row ? mapJob(row) : undefined;
    },
    migrate: (migrations) => migrate(sql, migrations),
    tickTotals: tickMetrics.totals,
    ...createAdminOperations(sql, now),
    ...createFlowOperations(sql, registry, now),
    ...schedules,
  };
}
