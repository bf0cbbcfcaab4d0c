/** The options and dependencies of a tick (src/runtime/tick/tick.ts), and their defaults in one place. */
import type { RegisteredTaskRow } from '../../store/event-subscriptions.ts';
import type { Sql } from '../../store/sql.ts';
import type { Logger, WarnOnce } from '../observability/log.ts';
import type { RunDeps } from './run-job.ts';
import type { Tracing } from '../observability/tracing.ts';

export interface TickOptions {
  /** How long the tick may run, in ms from its start (the invocation's budget). Default 30 000. */
  budgetMs?: number;
  /** Return as soon as nothing is due and nothing runs, instead of polling until the budget ends. Default false. */
  untilIdle?: boolean;
  /** Handlers running at once. Default 10. */
  concurrency?: number;
  /**
   * Kept free at the end of the budget: handlers are aborted `marginMs` before it ends, and no job
   * is claimed whose timeout does not fit before that. Default 1 000.
   */
  marginMs?: number;
  /**
   * The longest job timeout any tick of this deployment can claim (on Cloudflare the cron's or
   * the alarm's, not this HTTP tick's): a ctx.invoke of a child whose timeout is longer rejects
   * with a PermanentError and enqueues nothing, as an HTTP enqueue of it is refused. Default:
   * this tick's budgetMs − marginMs.
   */
  maxJobTimeoutMs?: number;
  /** After an abort, how long a handler has to stop before it is abandoned; at most marginMs / 2, so that its result is written by the deadline. Default 250. */
  abandonAfterMs?: number;
  /**
   * Wait between claims while the queue is empty, in ms. An idle tick makes at most one statement
   * per pollIntervalMs on average: after a poll that took k statements (a reap, a firing) it
   * waits k · pollIntervalMs, and a due reap takes a poll's place: an idle minute costs at most
   * 60 statements at the default. Default 1 000.
   */
  pollIntervalMs?: number;
  /** Lease for long jobs, renewed every third of it; short jobs get timeout + 5 s. Default 30 000. */
  leaseMs?: number;
  /** Reap expired leases at the start and at most this often (ms); 0 turns reaping off. Default 10 000. */
  reapIntervalMs?: number;
  /** Fire due schedules at the start and at most this often (ms); 0 fires only at the start. Default 1 000. */
  fireIntervalMs?: number;
  /** A name for this worker in locked_by; a random suffix is always added. Default "tick". */
  workerName?: string;
  /** Aborting it stops claiming; running handlers get `drainMs` to finish, then are released. */
  signal?: AbortSignal;
  /** See `signal`. Default 10 000. */
  drainMs?: number;
  /**
   * When the budget began, as a `performance.now()` instant: an HTTP request's arrival, so that
   * the work done before the tick (an enqueue) counts against the platform's limit. Default: when
   * tick() is called. A value in the future or not finite is ignored.
   */
  startedAt?: number;
  /**
   * Called when a claim fills every slot of the tick (more may be due than it can run), so that a
   * platform starts more invocations (maxParallelTicks). It may be called again at later full
   * claims: callers act once. Default none.
   */
  onBacklog?: () => void;
  /**
   * The most subrequests this tick may make: each of its statements is one over Neon's HTTP driver,
   * and a Workers invocation may make 50 on the Free plan (10 000 on Paid) — the one past it fails.
   * The tick stops claiming while it can still write every claimed job's result within it: it
   * keeps, per job claimed and not yet written, one for its result and `subrequestsPerJob` for the
   * handler's own, plus the heartbeats its remaining time may need; upkeep (reaping, firing,
   * dispatching) is skipped when it would eat into that. Work it leaves is still due: its
   * conclusion says so and the next invocation takes it. Default: no limit.
   */
  subrequestLimit?: number;
  /**
   * Subrequests a handler makes itself (its fetches, `ctx.enqueue`, step writes), kept per claimed
   * job against subrequestLimit. Default 0.
   */
  subrequestsPerJob?: number;
  /**
   * The invocation's tally, shared by several ticks (and the caller's own requests) of one
   * invocation: the tick adds each of its statements to `spent` and measures subrequestLimit
   * against it. Default: the tick's own, from 0.
   */
  subrequestCounter?: SubrequestCounter;
}

/** Subrequests an invocation has made (TickOptions.subrequestCounter). */
export interface SubrequestCounter {
  spent: number;
}

export interface TickDeps {
  sql: Sql;
  run: Omit<RunDeps, 'heartbeat' | 'abandonAfterMs' | 'sql' | 'now' | 'leaseMs' | 'leaseGraceMs' | 'remainingMs' | 'maxJobTimeoutMs'>;
  /** The clock passed into SQL: null means the database's now(). Tests pass instants in. */
  now: () => Date | null;
  /**
   * Fires due schedules, before the first claim and then, at most every fireIntervalMs, when the
   * claiming statement says a schedule is due (see staticSchedules); returns how many jobs it created.
   */
  beforeClaim?: () => Promise<number>;
  /**
   * The static schedules beforeClaim fires. Given, the claiming statement also tells whether a
   * schedule is due, and beforeClaim runs only then (one statement per idle poll, not two).
   * Absent, beforeClaim runs every fireIntervalMs.
   */
  staticSchedules?: readonly string[];
  /**
   * With staticSchedules: whether beforeClaim has run in this process already. Its first run
   * writes the static definitions, which cannot change while the process lives; after it, a tick
   * does not read the schedules at its start but asks its first claiming statement, like every
   * later one (a tick with no schedule due, such as the one an enqueue starts, is a statement
   * shorter). Default false: read at the start.
   */
  schedulesRead?: () => boolean;
  /**
   * This deployment's tasks and their `on:` names, registered by the first claiming statement of
   * this instance (skiplock.registered_task, migration 018: how a send by another process knows
   * which jobs are left for this deployment, and what pauseTask accepts): `needed` until `done`.
   */
  registration?: { rows: readonly RegisteredTaskRow[]; needed(): boolean; done(): void };
  /**
   * With `on:` tasks: their subscriptions, probed by the claiming statements that probe leases (at
   * the tick's start, then every reapIntervalMs: events_due), and the dispatch of the jobs other
   * senders left pending for them (src/runtime/events/events.ts), run only when a claim said some are.
   */
  events?: { subscriptions: { tasks: readonly string[]; names: readonly string[] }; dispatch(): Promise<{ started: number; more: boolean }> };
  /** Upkeep run beside the reaper (retention: pruning finished jobs, rate-limited by its owner); resolves true when it ran a statement. */
  housekeeping?: () => Promise<boolean | void>;
  log: Logger;
  warnOnce: WarnOnce;
  /** OpenTelemetry (src/runtime/observability/tracing.ts): each attempt runs in its span. Default none. */
  tracing?: Tracing | null;
}

export const TICK_DEFAULTS = {
  budgetMs: 30_000,
  untilIdle: false,
  concurrency: 10,
  marginMs: 1_000,
  abandonAfterMs: 250,
  pollIntervalMs: 1_000,
  leaseMs: 30_000,
  reapIntervalMs: 10_000,
  fireIntervalMs: 1_000,
  workerName: 'tick',
  drainMs: 10_000,
  subrequestsPerJob: 0,
} as const;


/** The options with their defaults filled in. */
type OptionalTickOptions = 'signal' | 'startedAt' | 'maxJobTimeoutMs' | 'onBacklog' | 'subrequestLimit' | 'subrequestCounter';
export type ResolvedTickOptions = Required<Omit<TickOptions, OptionalTickOptions>> & Pick<TickOptions, OptionalTickOptions>;
