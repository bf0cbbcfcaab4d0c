/**
 * The SkiplockTicker Durable Object (the default ticker, TICKER unset or "alarm"): it keeps the
 * wake state in its storage and its alarm at the instant the state names (ticker-store.ts). Its
 * alarm ticks until idle and writes the state the database reports. The Worker tells it when work
 * becomes due (POST /lower `{ at }`: an enqueue for later, the conclusion of a tick the Worker ran
 * itself), and the minute cron, the safety net, asks it to check its alarm (POST /cron): no
 * statement, no tick unless the state says so. One instance, named "skiplock", so alarms never overlap.
 */
import { isNotMigrated } from '../../runtime/schema-check.ts';
import type { Deployment, Env } from './deployment.ts';
import { fanOutOnBacklog } from './fan-out.ts';
import type { DurableObjectState } from './runtime-types.ts';
import { createDurableObjectWakeStore } from './ticker-store.ts';

export interface TickerClass {
  new (state: DurableObjectState, env: Env): { fetch(request: Request): Promise<Response>; alarm(): Promise<void> };
}

/** After a failed alarm (the database did not answer): try again this soon rather than sleep with work queued. */
const RETRY_AFTER_FAILURE_MS = 5_000;
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

    constructor(state: DurableObjectState, env: Env) {
      this.#state = state;
      this.#env = env;
    }

    #store() {
      return createDurableObjectWakeStore(this.#state.storage, deploymentFor(this.#env).idleCheckMs);
    }

    async fetch(request: Request): Promise<Response> {
      const path = new URL(request.url).pathname;
      const store = this.#store();
      if (path === '/lower') {
        const { at } = (await request.json()) as { at?: unknown };
        await store.lower(typeof at === 'number' && Number.isFinite(at) ? at : Date.now());
      } else {
        // /cron, and /wake from an older Worker version: only make sure the alarm is where the state says.
        await store.arm();
      }
      return new Response(null, { status: 204 });
    }

    async alarm(): Promise<void> {
      const deployment = deploymentFor(this.#env);
      const { skiplock, alarmTick } = deployment;
      const store = this.#store();
      try {
        // A backlog (a claim fills every slot) starts more invocations, ending with this one (fan-out.ts).
        const onBacklog = fanOutOnBacklog(this.#env, deployment, Date.now() + (alarmTick.budgetMs ?? 25_000));
        // The state is read and written through the store, which sets the next alarm.
        const { concluded } = await skiplock.tickIfDue({ ...alarmTick, untilIdle: true, store, onBacklog });
        if (concluded) await store.arm();
        else await this.#state.storage.setAlarm(Date.now() + RETRY_AFTER_FAILURE_MS);
      } catch (error) {
        // not_migrated was said once per instance by skiplock itself (with the fix): not at each alarm.
        if (isNotMigrated(error)) return this.#state.storage.setAlarm(Date.now() + RETRY_NOT_MIGRATED_MS);
        console.error('[skiplock] alarm tick failed', error);
        await this.#state.storage.setAlarm(Date.now() + RETRY_AFTER_FAILURE_MS);
      }
    }
  };
}
