/**
 * When ticks run. Two halves around the wake state (src/runtime/wake/state.ts):
 *
 *   dueWork(at) ... every skiplock write that creates or moves due work (and `wake()`): lowers the
 *                   state, then asks the platform's driver to start a tick (now) or a wake-up (later)
 *   tickIfDue() ... what a cron, an alarm, the Node loop run: read the state; nothing due → no
 *                   statement; else tick until idle and write the state the database reports
 *   tick() ........ a tick the state did not decide (skiplock.tick(), GET /v1/tick,
 *                   enqueueAndWait({ tick }), the CLI): ticks, then — when it claimed, reaped or
 *                   fired anything — writes the state the database reports, as tickIfDue does, and
 *                   tells the driver (and the deployment) of an instant earlier than the one planned
 *
 * The state machine stays here; a platform adapter only says where the state lives (WakeDriver.store)
 * and what "start a tick in the background" means there (WakeDriver.onDueWork).
 */
import { emptyTickResult, type TickResult } from '../../core/types.ts';
import type { Logger } from '../observability/log.ts';
import { TICK_DEFAULTS, type TickOptions } from '../tick/options.ts';
import { concludeWakeState, createMemoryWakeStore, shouldTick, type WakeReason, type WakeState, type WakeStore } from './state.ts';

export interface WakeDriver {
  /** Where the wake state lives. Default: memory of this process (isolate). */
  store?: WakeStore;
  /**
   * Work may be due at `atMs` (epoch ms, platform clock), already lowered into the store. Start a
   * tick in the background of the current invocation when it is due now (atMs ≤ now +
   * WAKE_EARLY_MS), or arrange a wake-up at atMs where the platform can (a Durable Object alarm,
   * a timer). May return a promise (`wake()` waits for it); a throw or rejection is logged.
   */
  onDueWork?(atMs: number): void | Promise<unknown>;
  /** The platform's clock, epoch ms. Default Date.now; tests compress time with their own. */
  now?: () => number;
  /**
   * The options of the ticks this platform runs when its wake state says so (the Node runner's
   * loop): a tick run outside them (tick(), GET /v1/tick) concludes with what those could claim
   * (their budget decides which jobs' timeouts fit). Default: that tick's own options, its budget
   * widened to its maxJobTimeoutMs (the longest any tick of the deployment takes).
   */
  ticks?: TickOptions;
}

export interface TickIfDueOptions extends TickOptions {
  /** The wake state to decide by and write, instead of the driver's (the Durable Object passes its own storage). */
  store?: WakeStore;
  /** Tick whatever the wake state says (GET /v1/tick, a person). Default false. */
  force?: boolean;
  /**
   * Not due yet, but due within this many ms: wait for it and tick, again until this window
   * closes (a minute invocation waiting inside its minute instead of polling); a tick that leaves
   * work due now is followed by another. Default 0: one decision.
   */
  waitWithinMs?: number;
  /**
   * The budget whose jobs the conclusion counts as due: the longest any tick of the deployment
   * has (on Cloudflare the alarm's), so that work this tick cannot fit (a job whose timeout is
   * longer than its budget) is still due for the tick that can, instead of waiting for the safety
   * check. Default: this tick's budgetMs. Only for a single decision: with waitWithinMs a tick
   * would find due what it cannot claim.
   */
  dueBudgetMs?: number;
}

export interface TickIfDueResult {
  /** Whether a tick ran (at least one). */
  ticked: boolean;
  /** Why the last decision was what it was. */
  reason: WakeReason | 'forced';
  /** What the ticks did (all zero when none ran). */
  result: TickResult;
  /** When to look again (epoch ms, platform clock): the wake state's next instant, or the next safety check; null: never. */
  nextAtMs: number | null;
  /** The tick left work due now (its budget ended with a backlog): start another invocation. */
  backlog: boolean;
  /** False when a tick ran but the wake state could not be written (the database did not say what is next). */
  concluded: boolean;
}

export interface WakeDeps {
  driver: () => WakeDriver;
  idleCheckMs: number;
  log: Logger;
  /** The tick (skiplock.tick) with these options. */
  tick(options: TickOptions): Promise<TickResult>;
  /** Milliseconds until anything is due, from the database (one statement); null: nothing. */
  dueInMs(options: TickOptions): Promise<number | null>;
  /**
   * A deployment this process does not run, woken too (the `deployment` option,
   * src/runtime/wake/deployment.ts): bounded, never rejects. `explicit`: `wake()`, always sent.
   */
  remote?: (atMs: number, explicit: boolean) => Promise<void>;
}

export interface Waker {
  store(): WakeStore;
  /** `wake()`: lowers, starts, wakes the deployment (always); resolves once all of it is done. */
  dueWork(at?: Date | number): Promise<void>;
  /**
   * A write's hook: the same, but resolves once the deployment's wake request (if any) is done —
   * bounded by its timeout —, not waiting for the local driver (a background tick).
   */
  afterWrite(at?: Date | number): Promise<void>;
  tickIfDue(options?: TickIfDueOptions): Promise<TickIfDueResult>;
  /**
   * A tick the wake state did not decide (skiplock.tick(), GET /v1/tick, enqueueAndWait({ tick })):
   * concludes into the store as tickIfDue does — the retries, woken parents and next instants it
   * leaves —, at the cost of one statement, and none when it claimed, reaped and fired nothing.
   * An instant earlier than the one the store held (or than now, when that one has passed) goes
   * to the driver (onDueWork: the Node loop's timer, the Worker's alarm) and to the deployment.
   */
  tick(options: TickOptions): Promise<TickResult>;
}

export function createWaker(deps: WakeDeps): Waker {
  const w = wakeContext(deps);
  return {
    store: w.store,
    dueWork: (at) => dueWork(w, at),
    afterWrite: (at) => afterWrite(w, at),
    tickIfDue: (options) => tickIfDue(w, options),
    tick: (options) => tick(w, options),
  };
}

/** What a waker's operations below share: its deps, and the store, clock and warning drawn from them. */
interface WakeContext {
  readonly deps: WakeDeps;
  /** The driver's wake store, or this waker's own memory. */
  store(): WakeStore;
  /** The platform's clock, epoch ms. */
  now(): number;
  /** A rejection handler that logs `what` as a warning. */
  warn(what: string): (error: unknown) => void;
}

function wakeContext(deps: WakeDeps): WakeContext {
  const fallbackStore = createMemoryWakeStore();
  return {
    deps,
    store: () => deps.driver().store ?? fallbackStore,
    now: () => deps.driver().now?.() ?? Date.now(),
    warn: (what) => (error) => deps.log('warn', what, { error: String(error) }),
  };
}

function readFrom(w: WakeContext, s: WakeStore): Promise<WakeState | null> {
  return s.read().catch((error: unknown) => (w.warn('reading the wake state failed; checking the database')(error), null));
}

function start(w: WakeContext, at: Date | number | undefined, explicit: boolean): { local: Promise<unknown>; remote: Promise<void> } | null {
  const { deps, warn } = w;
  const atMs = at === undefined ? w.now() : typeof at === 'number' ? at : at.getTime();
  if (!Number.isFinite(atMs)) return null;
  // Both at once, the driver synchronously: a platform's waitUntil must be called while the
  // invocation is still on (a user's route returns right after its enqueue). A background tick
  // the driver starts for due-now work is forced, so it does not depend on the lower landing first.
  const lowered = w.store().lower(atMs).catch(warn('lowering the wake state failed'));
  const started = (async () => deps.driver().onDueWork?.(atMs))().catch(warn('starting a tick for due work failed'));
  // The deployment's clock is the real one (a test's compressed platform clock is this process's).
  const remoteAtMs = at === undefined ? Date.now() : atMs;
  const remote = deps.remote ? deps.remote(remoteAtMs, explicit).catch(warn('waking the deployment failed')) : Promise.resolve();
  return { local: Promise.all([lowered, started]), remote };
}

async function dueWork(w: WakeContext, at?: Date | number): Promise<void> {
  const s = start(w, at, true);
  if (s) await Promise.all([s.local, s.remote]);
}

async function afterWrite(w: WakeContext, at?: Date | number): Promise<void> {
  await start(w, at, false)?.remote;
}

/** One decision, and the tick it calls for: the state written from the database's answer. */
async function step(w: WakeContext, options: TickOptions, force: boolean, store: () => WakeStore, dueBudgetMs: number | undefined) {
  const { deps, now } = w;
  const read = () => readFrom(w, store());
  const state = await read();
  const decision = force ? { tick: true, reason: 'forced' as const, nextAtMs: null } : shouldTick(state, now(), deps.idleCheckMs);
  if (!decision.tick) return { ...decision, atMs: decision.nextAtMs, result: null, backlog: false, concluded: true };
  // The conclusion's statement is kept out of the tick's subrequests, and counted when made.
  const limit = options.subrequestLimit;
  const result = await deps.tick(limit === undefined ? options : { ...options, subrequestLimit: limit - 1 });
  let backlog = false;
  let concluded = false;
  try {
    if (options.subrequestCounter) options.subrequestCounter.spent += 1;
    const dueIn = await conclude(w, store(), state, dueBudgetMs === undefined ? options : { ...options, budgetMs: Math.max(dueBudgetMs, options.budgetMs ?? 0) });
    backlog = dueIn !== null && dueIn <= 0;
    concluded = true;
  } catch (error) {
    // The state keeps saying "due": the next trigger ticks again.
    w.warn('asking when work is next due failed; the next trigger ticks again')(error);
  }
  const stored = await read();
  const after = shouldTick(stored, now(), deps.idleCheckMs);
  const nextAtMs = after.tick ? now() : after.nextAtMs;
  // An instant within WAKE_EARLY_MS counts as due now; a window waits for the instant itself.
  const atMs = after.reason === 'due' && stored!.dueAt! > now() ? stored!.dueAt! : nextAtMs;
  return { tick: true, reason: decision.reason, nextAtMs, atMs, result, backlog, concluded };
}

async function tickIfDue(w: WakeContext, options: TickIfDueOptions = {}): Promise<TickIfDueResult> {
  const { force = false, waitWithinMs = 0, store: given, dueBudgetMs, ...rest } = options;
  const storeOf = given ? () => given : w.store;
  // One tally for every tick of this call (a window's ticks are one invocation's).
  const tickOptions = { ...rest, subrequestCounter: rest.subrequestCounter ?? { spent: 0 } };
  const limit = tickOptions.subrequestLimit;
  const until = w.now() + waitWithinMs;
  const total = emptyTickResult();
  let ticked = false;
  for (let first = true; ; first = false) {
    const s = await step(w, tickOptions, force && first, storeOf, waitWithinMs > 0 ? undefined : dueBudgetMs);
    if (s.result) {
      ticked = true;
      for (const key of Object.keys(total) as (keyof TickResult)[]) total[key] += s.result[key];
    }
    const done = { ticked, reason: s.reason, result: total, nextAtMs: s.nextAtMs, backlog: s.backlog, concluded: s.concluded };
    // Inside a window, wait for the next instant and tick then, also when the tick left work due
    // now: nothing else takes this invocation's place (in the Worker's cron mode the next trigger
    // is the next minute's cron), and a tick that ends idle just before a job's instant leaves
    // exactly that — its conclusion, a moment later, finds the job due.
    // A window also ends when the invocation's subrequests could not pay for a claim and its conclusion.
    const spentOut = limit !== undefined && tickOptions.subrequestCounter.spent + 3 > limit;
    if (waitWithinMs <= 0 || !s.concluded || s.nextAtMs === null || s.nextAtMs > until || tickOptions.signal?.aborted || spentOut) return done;
    await sleep(waitMs(w, s, tickOptions), tickOptions.signal);
  }
}

/**
 * How long a window waits before its next step. Until the instant itself, not WAKE_EARLY_MS
 * before it: the instant is the database's "due in N ms" placed on the platform clock after the
 * answer came, so at or just after the database's own; a tick that wakes earlier finds nothing
 * and ends. Due now after a tick that claimed nothing: one poll interval, as the tick itself
 * would wait (what is due may be work no claim can take yet, such as a full concurrency key:
 * ticking again at once would poll the database without pause); due now otherwise: at once.
 */
function waitMs(w: WakeContext, s: { atMs: number | null; result: TickResult | null }, options: TickOptions): number {
  const ms = Math.max(0, (s.atMs ?? w.now()) - w.now());
  if (ms > 0 || !s.result || s.result.claimed > 0) return ms;
  return options.pollIntervalMs ?? TICK_DEFAULTS.pollIntervalMs;
}

async function tick(w: WakeContext, options: TickOptions): Promise<TickResult> {
  const { deps, now, warn } = w;
  const result = await deps.tick(options);
  // Nothing claimed, reaped or fired: it changed no due work (DESIGN: the state is a hint).
  if (result.claimed + result.reaped + result.fired === 0) return result;
  const s = w.store();
  // Read before the question: a lower landing after it moves the version, and the write keeps the earlier instant.
  const startedAt = now();
  const state = await readFrom(w, s);
  let dueIn: number | null;
  try {
    dueIn = await conclude(w, s, state, concludingOptions(w, options));
  } catch (error) {
    warn('concluding a tick into the wake state failed; the platform finds its work at its next check')(error);
    return result;
  }
  const next = concludeWakeState(dueIn, now());
  if (next.dueAt === null) return result;
  // Planned: the instant the platform was to wake at; one that has passed is spent (its tick ran or runs).
  const planned = state?.dueAt ?? null;
  if (planned === null || next.dueAt < planned || planned <= startedAt) {
    const atMs = next.dueAt;
    void (async () => deps.driver().onDueWork?.(atMs))().catch(warn('starting a tick for due work failed'));
  }
  if (deps.remote) await deps.remote(Date.now() + Math.max(0, dueIn!), false).catch(warn('waking the deployment failed'));
  return result;
}

/**
 * A tick's conclusion: the database says when work is next due (one statement), and the state
 * seen before the tick is replaced by that answer (or kept earlier, if lowered meanwhile).
 */
async function conclude(w: WakeContext, s: WakeStore, seen: WakeState | null, options: TickOptions): Promise<number | null> {
  const dueIn = await w.deps.dueInMs(options);
  await s.write(concludeWakeState(dueIn, w.now()), seen?.version ?? -1);
  return dueIn;
}

/** What a tick of this platform could claim: the driver's ticks, or these options widened to the deployment's longest job. */
function concludingOptions(w: WakeContext, options: TickOptions): TickOptions {
  const platform = w.deps.driver().ticks;
  if (platform) return platform;
  if (options.maxJobTimeoutMs === undefined) return options;
  const budgetMs = Math.max(options.budgetMs ?? TICK_DEFAULTS.budgetMs, options.maxJobTimeoutMs + (options.marginMs ?? TICK_DEFAULTS.marginMs));
  return { ...options, budgetMs };
}

/**
 * One background tick at a time per process (isolate): a request while one runs marks it to run
 * again when it ends, so a burst of enqueues costs one tick chain, and none is missed (an enqueue
 * seen after the running tick's last claim is picked up by the rerun). Resolves when the chain ends.
 * `run` is told whether it is a rerun of the chain (the same invocation's: its subrequests add up).
 *
 * A run that has not ended `staleAfterMs` after it began belonged to an invocation that is gone
 * (a Worker's waitUntil ends 30 s after the response, an exceeded CPU limit ends it at once: its
 * promise never settles): the next request starts a chain of its own instead of waiting on it for ever.
 */
export function createBackgroundTicks(run: (rerun: boolean) => Promise<unknown>, log: Logger, staleAfterMs = Infinity): () => Promise<void> {
  let chain: Promise<void> | null = null;
  let again = false;
  let runStartedAt = 0;
  let current: object | null = null;
  return () => {
    if (chain && performance.now() - runStartedAt <= staleAfterMs) {
      again = true;
      return chain;
    }
    if (chain) log('warn', 'a background tick never ended (its invocation was ended); starting another', { staleAfterMs });
    again = false;
    const mine = (current = {});
    chain = (async () => {
      try {
        for (let rerun = false; ; rerun = true) {
          again = false;
          runStartedAt = performance.now();
          await run(rerun).catch((error: unknown) => log('error', 'background tick failed', { error: String(error) }));
          if (!again || current !== mine) break;
        }
      } finally {
        if (current === mine) {
          chain = null;
          current = null;
        }
      }
    })();
    return chain;
  };
}

/** The longest setTimeout delay (about 24.8 days). */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** A sleep an abort ends early. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const timer = setTimeout(done, Math.min(ms, MAX_TIMER_MS));
    signal?.addEventListener('abort', done, { once: true });
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    }
  });
}
