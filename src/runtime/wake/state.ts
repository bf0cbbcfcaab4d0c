/**
 * The wake state: the earliest instant anything this deployment runs can be due, kept where the
 * platform keeps state (the SkiplockTicker Durable Object on Cloudflare, memory in the Node
 * runner, best effort on Vercel), so that a cron or alarm invocation knows — without asking the
 * database — whether there can be anything to claim.
 *
 * It is a hint, never the truth (DESIGN invariant 9): a lost or stale state delays work at most
 * until the next safety check (`idleCheckMs`), and never loses it.
 *
 * Clocks. Instants here are epoch ms of the *platform's* clock (Date.now()). DESIGN's "one clock"
 * rule is about comparisons made in the database, which still use now(); the wake state is only
 * ever compared with the clock of the invocation reading it. A tick learns its next instant from
 * the database as a duration ("due in N ms", measured with the database's clock) and turns it into
 * an instant with Date.now() + N, so clock skew between the database and the platform cancels out
 * (only the statement's latency remains, and that errs late: N is measured when the database
 * answers and added to Date.now() when the answer arrives, so the instant falls after the true one
 * by the answer's return trip — a few ms, well inside the tick's own pickup). An instant given by a caller
 * (`enqueue({ runAt })`, `wake(at)`) is already on the platform's clock. When the database's clock
 * lags the platform's, a wake-up comes early: its tick finds nothing due, and its final statement
 * says how long is left — the state corrects itself at the cost of one statement. WAKE_EARLY_MS
 * is the other margin: an instant that close counts as due now, rather than setting a timer for
 * a few milliseconds.
 */

/** What a WakeStore holds. */
export interface WakeState {
  /**
   * The earliest instant (epoch ms, platform clock) at which anything can be due; null when
   * nothing is known to be due ever (only the safety check wakes the deployment).
   */
  dueAt: number | null;
  /**
   * When the database was last consulted (epoch ms, platform clock): the safety check counts from
   * here. Null when it never was (a state made by lower() alone): such a state ticks at once.
   */
  checkedAt: number | null;
  /**
   * Bumped by every lower() and write(): a tick's write replaces the state only if nothing changed
   * since the state it started from; otherwise the earlier of the two instants wins (see write).
   */
  version: number;
}

/**
 * Where a platform keeps the wake state. Implementations: createMemoryWakeStore (below; the Node
 * runner, tests, and a Worker isolate in cron-only mode), the Durable Object's storage
 * (src/platform/cloudflare/), Vercel's Runtime Cache (src/platform/vercel/).
 */
export interface WakeStore {
  /** The state, or null when none is known (never written, evicted, lost): then a tick checks the database. */
  read(): Promise<WakeState | null>;
  /**
   * Something may be due at `atMs` (epoch ms, platform clock): dueAt becomes min(dueAt, atMs), and
   * the version moves. On a null state it makes `{ dueAt: atMs, checkedAt: null }` (still
   * unknown: it ticks at once). A store that can wake the deployment at an instant (the Durable
   * Object's alarm) sets it here.
   */
  lower(atMs: number): Promise<void>;
  /**
   * A tick's conclusion (`dueAt` computed from the database, `checkedAt` when). `seenVersion` is
   * the version of the state the tick started from (read() before it; -1 for a null state). If
   * the stored version is still `seenVersion`, `next` replaces it; otherwise something lowered
   * it (or another tick wrote) meanwhile, and dueAt becomes the earlier of the two — an early
   * wake-up costs one statement, a late one would cost a job its start time.
   */
  write(next: Omit<WakeState, 'version'>, seenVersion: number): Promise<void>;
}

/** An instant this close (ms) to now counts as due now. */
export const WAKE_EARLY_MS = 50;

/**
 * Default of `idleCheckMs` / IDLE_CHECK_MS where a hint can be lost between two processes (Vercel's
 * best-effort Runtime Cache, a Worker's isolate memory in cron mode) and on the Node runner: one
 * database check an hour while idle.
 */
export const DEFAULT_IDLE_CHECK_MS = 3_600_000;

/**
 * The default where the wake state is durable and one place hears every write: the Cloudflare
 * Durable Object (alarm mode). Only a write nobody announces waits for it (SQL, a service without
 * `deployment`); a simulated month of an idle queue with one daily schedule costs about 1.3
 * Neon CU-hours with it, 15.2 with one hour (docs/platforms.md, `npm run bench:neon`).
 */
export const DURABLE_IDLE_CHECK_MS = 24 * 3_600_000;

export type WakeReason =
  /** No state is known (cold start, evicted): check the database once. */
  | 'unknown'
  /** Something is due now (dueAt ≤ now + WAKE_EARLY_MS). */
  | 'due'
  /** Nothing is due, but the last database check is idleCheckMs old: the safety check. */
  | 'idle-check'
  /** Nothing is due yet: make no statement. */
  | 'not-due';

export interface WakeDecision {
  tick: boolean;
  reason: WakeReason;
  /**
   * When not ticking: the instant (epoch ms) this decision changes — the earlier of dueAt and the
   * next safety check; null when neither will ever come (idleCheckMs 0 and nothing due). A
   * platform that can set a timer or alarm sets it here. When ticking: null.
   */
  nextAtMs: number | null;
}

/**
 * Whether an invocation at `nowMs` should tick, from the wake state alone (no I/O). `idleCheckMs`
 * 0 turns the safety check off.
 */
export function shouldTick(state: WakeState | null, nowMs: number, idleCheckMs: number): WakeDecision {
  if (state === null || state.checkedAt === null) return { tick: true, reason: 'unknown', nextAtMs: null };
  if (state.dueAt !== null && state.dueAt <= nowMs + WAKE_EARLY_MS) return { tick: true, reason: 'due', nextAtMs: null };
  const checkAt = idleCheckMs > 0 ? state.checkedAt + idleCheckMs : null;
  if (checkAt !== null && checkAt <= nowMs) return { tick: true, reason: 'idle-check', nextAtMs: null };
  return { tick: false, reason: 'not-due', nextAtMs: minOrNull(state.dueAt, checkAt) };
}

/**
 * The state a tick leaves: `dueInMs` as the database said it ("ms until the next work", negative
 * when overdue, null when nothing), turned into an instant on the platform's clock at `nowMs`.
 */
export function concludeWakeState(dueInMs: number | null, nowMs: number): Omit<WakeState, 'version'> {
  return { dueAt: dueInMs === null ? null : nowMs + Math.max(0, dueInMs), checkedAt: nowMs };
}

/** The rule of WakeStore.write, for implementations: what to store given what is stored. */
export function mergeWrite(stored: WakeState | null, next: Omit<WakeState, 'version'>, seenVersion: number): WakeState {
  const version = (stored?.version ?? -1) + 1;
  if (stored === null || stored.version === seenVersion) return { ...next, version };
  return { dueAt: minOrNull(stored.dueAt, next.dueAt), checkedAt: next.checkedAt, version };
}

/** The rule of WakeStore.lower, for implementations. */
export function mergeLower(stored: WakeState | null, atMs: number): WakeState {
  if (stored === null) return { dueAt: atMs, checkedAt: null, version: 0 };
  return { ...stored, dueAt: minOrNull(stored.dueAt, atMs), version: stored.version + 1 };
}

/** A wake state in memory: the Node runner's, the tests', a Worker isolate's without the Durable Object. */
export function createMemoryWakeStore(initial: WakeState | null = null): WakeStore & { peek(): WakeState | null } {
  let state = initial;
  return {
    peek: () => state,
    read: async () => state,
    async lower(atMs) {
      state = mergeLower(state, atMs);
    },
    async write(next, seenVersion) {
      state = mergeWrite(state, next, seenVersion);
    },
  };
}

function minOrNull(a: number | null, b: number | null): number | null {
  return a === null ? b : b === null ? a : Math.min(a, b);
}
