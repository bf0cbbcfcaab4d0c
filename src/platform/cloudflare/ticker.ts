/**
 * Opt-in (TICKER = "alarm"): a Durable Object whose alarm ticks every second while there is
 * work, else at the next due job or schedule instant (src/runtime/alarm-ticker.ts), and sets no
 * alarm when there is neither. An enqueue (and the minute cron, as a safety net) wakes it with
 * POST /wake. One instance, named "skiplock", so alarms never overlap.
 */
import { tickAndPlanNext } from '../../runtime/alarm-ticker.ts';
import type { Deployment, Env } from './deployment.ts';
import type { DurableObjectState } from './runtime-types.ts';

export interface TickerClass {
  new (state: DurableObjectState, env: Env): { fetch(): Promise<Response>; alarm(): Promise<void> };
}

/** The Durable Object class for these deployments (createWorker's `Ticker`). */
export function createTickerClass(deploymentFor: (env: Env) => Deployment): TickerClass {
  return class SkiplockTicker {
  readonly #state: DurableObjectState;
  readonly #env: Env;

  constructor(state: DurableObjectState, env: Env) {
    this.#state = state;
    this.#env = env;
  }

  /** POST /wake: tick now unless an alarm is already due within a second. */
  async fetch(): Promise<Response> {
    const alarm = await this.#state.storage.getAlarm();
    if (alarm === null || alarm > Date.now() + 1_000) await this.#state.storage.setAlarm(Date.now());
    return new Response(null, { status: 204 });
  }

  async alarm(): Promise<void> {
    const { skiplock, alarmTick } = deploymentFor(this.#env);
    try {
      const { nextInMs } = await tickAndPlanNext(skiplock, alarmTick);
      if (nextInMs !== null) await this.#state.storage.setAlarm(Date.now() + nextInMs);
    } catch (error) {
      // The database did not answer: try again shortly rather than sleeping with work queued.
      console.error('[skiplock] alarm tick failed', error);
      await this.#state.storage.setAlarm(Date.now() + 5_000);
    }
  }
  };
}
