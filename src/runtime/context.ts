/**
 * What createSkiplock (src/runtime/skiplock.ts) hands every capability it composes: the Sql port,
 * the task registry, the clock passed into SQL, where warnings go, tracing, and the one hook that
 * every write creating or moving due work calls. Each capability builds its operations from this
 * object, so none of them knows the facade, and the facade reads as the list of what it joins.
 */
import type { Clock } from '../store/clock.ts';
import type { Sql } from '../store/sql.ts';
import { warnOnceWith, type Logger, type WarnOnce } from './observability/log.ts';
import { resolveTracing, type OtelOption, type Tracing } from './observability/tracing.ts';
import { createRegistry, type TaskRegistry } from './tasks/task.ts';
import type { TaskList } from './tasks/task-types.ts';

/** The hook: work a write made is due at `at` (a Date or epoch ms on the platform's clock; undefined: now). */
export type DueWork = (at?: Date | number) => Promise<void>;

export interface SkiplockContext {
  /** The Sql port every operation uses (skiplock.ts: guarded for not_migrated, migrating first with autoMigrate). */
  readonly sql: Sql;
  readonly registry: TaskRegistry;
  /** The clock passed into SQL: null means the database's now(). Tests pass instants in. */
  readonly now: () => Clock;
  readonly log: Logger;
  readonly warnOnce: WarnOnce;
  /** OpenTelemetry (the `otel` option), resolved once: null when off or not installed. */
  readonly tracing: () => Promise<Tracing | null>;
  /** The active trace context, stored with what a write creates (jobs, events); undefined without one. */
  traceparent(): Promise<string | undefined>;
  /**
   * The one hook: every write that creates or moves due work calls it, with the instant it is due.
   * It waits only for the `deployment` wake request (bounded by its timeout), not for a local tick.
   */
  readonly dueWork: DueWork;
  /** A write's result, after telling the hook when the work it made is due (null: it made none; undefined: now). */
  after<T>(result: T, dueAt: (result: T) => Date | number | null | undefined): Promise<T>;
}

export interface ContextOptions {
  /** The Sql port as the operations use it. */
  sql: Sql;
  tasks: TaskList;
  log: Logger;
  /** The `now` option: the clock passed into SQL. Default the database's now(). */
  now: (() => Date | null) | undefined;
  otel: OtelOption;
  dueWork: DueWork;
}

export function createContext(options: ContextOptions): SkiplockContext {
  const { sql, log, dueWork } = options;
  const tracing = resolveTracing(options.otel);
  return {
    sql,
    registry: createRegistry(options.tasks),
    now: (): Clock => options.now?.() ?? null,
    log,
    warnOnce: warnOnceWith(log),
    tracing,
    traceparent: async () => (await tracing())?.currentTraceparent(),
    dueWork,
    async after(result, dueAt) {
      const at = dueAt(result);
      if (at !== null) await dueWork(at);
      return result;
    },
  };
}
