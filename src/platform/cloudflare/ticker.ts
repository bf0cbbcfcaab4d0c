/**
 * The SkiplockTicker Durable Object (the default ticker, TICKER unset or "alarm"): it keeps the
 * wake state in its storage and its alarm at the instant the state names (ticker-store.ts). Its
 * alarm ticks until idle and writes the state the database reports. The Worker tells it when work
 * becomes due (POST /lower `{ at }`: an enqueue for later, the backstop before a background tick
 * claims) and what a tick it ran itself concluded (POST /conclude `{ dueAt, checkedAt, seen }`,
 * merged as a tick's own write is: it replaces the state only if nothing changed it since version
 * `seen`); both answer `{ version }`. The minute cron, the safety net, asks it to check its alarm
 * (POST /cron): no statement, no tick unless the state says so. A failed alarm backs off
 * (TICKER_RETRY_BACKOFF). One instance, named "skiplock", so alarms never overlap.
 */
import { retryDelayMs, type RetryBackoff } from '../../runtime/tick/index.ts';
import { isNotMigrated } from '../../runtime/operations/index.ts';
import { TICK_DEFAULTS } from '../../runtime/tick/index.ts';
import type { TickIfDueResult } from '../../runtime/wake/index.ts';
import type { Deployment, Env } from './deployment.ts';
import { fanOutOnBacklog } from './fan-out.ts';
import type { DurableObjectState } from './runtime-types.ts';
import { createDurableObjectWakeStore } from './ticker-store.ts';

export interface TickerClass {
  new (state: DurableObjectState, env: Env): { fetch(request: Request): Promise<Response>; alarm(): Promise<void> };
}

/**
 * After failed alarms in a row (the tick threw, or its conclusion — the statement that says what
 * is next — failed): the next alarm after 1 s, doubling, jittered, up to a minute (10 s while the
 * database cannot be reached at all), so that a failing database is not tried by an alarm every
 * few seconds for ever (each try is an invocation, and keeps a Neon compute awake). Work written
 * meanwhile still lowers the alarm (an enqueue, the cron); the first success starts the count again.
 */
export const TICKER_RETRY_BACKOFF: RetryBackoff = { firstMs: 1_000, connectionLostMaxMs: 10_000, maxMs: 60_000 };
/**
 * An unmigrated database fails every try the same way until someone runs the migrations: try once
 * a minute (an enqueue or the cron lowers it anyway), so that Neon's compute can still suspend.
 */
const RETRY_NOT_MIGRATED_MS = 60_000;

/** The Durable Object class for these deployments (createWorker's `Ticker`). */
export function createTickerClass(deploymentFor: (env: Env) => Deployment): TickerClass {
  return class SkiplockTicker {
    readonly #state: DurableObjectState;
    readonly #env: Env;
    /** Failed alarms in a row (this instance's memory: an evicted object starts again at 1 s). */
    #failures = 0;

    constructor(state: DurableObjectState, env: Env) {
      this.#state = state;
      this.#env = env;
    }

    #store() {
      return createDurableObjectWakeStore(this.#state.storage, deploymentFor(this.#env).idleCheckMs);
    }

    async fetch(request: Request): Promise<Response> {
      return answerWorker(request, this.#store());
    }

    async alarm(): Promise<void> {
      const deployment = deploymentFor(this.#env);
      const store = this.#store();
      try {
        const tick = await tickOnAlarm(this.#env, deployment, store);
        if (!tick.concluded) return await this.#retryLater(new Error('the tick could not say when work is next due'));
        this.#failures = 0;
        await armAfter(tick, deployment, store, this.#state.storage);
      } catch (error) {
        // not_migrated was said once per instance by skiplock itself (with the fix): not at each alarm.
        if (isNotMigrated(error)) return this.#state.storage.setAlarm(Date.now() + RETRY_NOT_MIGRATED_MS);
        console.error('[skiplock] alarm tick failed', error);
        await this.#retryLater(error);
      }
    }

    /** The next alarm after a failure: backed off (TICKER_RETRY_BACKOFF). */
    async #retryLater(error: unknown): Promise<void> {
      this.#failures += 1;
      await this.#state.storage.setAlarm(Date.now() + retryDelayMs(this.#failures, error, Math.random, TICKER_RETRY_BACKOFF));
    }
  };
}

type TickerStore = ReturnType<typeof createDurableObjectWakeStore>;

/** The Worker's requests: POST /lower, /conclude (each answers `{ version }`), and /cron (204). */
async function answerWorker(request: Request, store: TickerStore): Promise<Response> {
  const path = new URL(request.url).pathname;
  if (path === '/lower') {
    const { at } = (await request.json()) as { at?: unknown };
    await store.lower(instant(at) ?? Date.now());
    return Response.json({ version: (await store.read())?.version ?? null });
  } else if (path === '/conclude') {
    // A tick the Worker ran (a background, fan-out or explicit one): its conclusion replaces the
    // state if nothing changed it since `seen` (the version the Worker last got from here; a
    // backstop it set before its tick is raised away), else only lowers it (WakeStore.write).
    const { dueAt, checkedAt, seen } = (await request.json()) as { dueAt?: unknown; checkedAt?: unknown; seen?: unknown };
    const at = instant(dueAt);
    const checked = instant(checkedAt);
    if (checked === null || (dueAt !== null && at === null)) return new Response('dueAt and checkedAt must be instants (dueAt may be null)', { status: 400 });
    await store.write({ dueAt: at, checkedAt: checked }, typeof seen === 'number' && Number.isInteger(seen) ? seen : -2);
    return Response.json({ version: (await store.read())?.version ?? null });
  } else {
    // /cron, and /wake from an older Worker version: only make sure the alarm is where the state says.
    await store.arm();
  }
  return new Response(null, { status: 204 });
}

/** One alarm's tick: until idle, through the store (which sets the next alarm), fanning out on a backlog. */
async function tickOnAlarm(env: Env, deployment: Deployment, store: TickerStore): Promise<TickIfDueResult> {
  const { skiplock, alarmTick } = deployment;
  // A backlog (a claim fills every slot) starts more invocations, ending with this one (fan-out.ts).
  const onBacklog = fanOutOnBacklog(env, deployment, Date.now() + (alarmTick.budgetMs ?? 25_000));
  // The state is read and written through the store, which sets the next alarm.
  // The fan-out requests are this invocation's subrequests too: kept out of the tick's.
  const fanOut = onBacklog ? deployment.maxParallelTicks - 1 : 0;
  const limit = alarmTick.subrequestLimit === undefined ? undefined : alarmTick.subrequestLimit - fanOut;
  return skiplock.tickIfDue({ ...alarmTick, untilIdle: true, store, onBacklog, ...(limit !== undefined && { subrequestLimit: limit }) });
}

/** The next alarm after a tick that concluded: where the state says, or after a poll's pause. */
async function armAfter({ ticked, backlog, result }: TickIfDueResult, { alarmTick }: Deployment, store: TickerStore, storage: DurableObjectState['storage']): Promise<void> {
  // Due now after a tick that claimed and reaped nothing: what is due is work no claim can take
  // yet; the next alarm after a poll's pause, as a tick itself would wait, not at once (no spin).
  if (ticked && backlog && result.claimed === 0 && result.reaped === 0) await storage.setAlarm(Date.now() + (alarmTick.pollIntervalMs ?? TICK_DEFAULTS.pollIntervalMs));
  else await store.arm();
}

/** A finite number (epoch ms), else null. */
function instant(value: unknown): number | null {
  return typeof value === 'number' && Number.isFinite(value) ? value : null;
}
