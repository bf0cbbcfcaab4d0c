/**
 * maxParallelTicks on Cloudflare: one Workers invocation runs at most TICK_CONCURRENCY (5)
 * handlers, so a backlog drains at 5 jobs at a time unless more invocations take it. The Durable
 * Object's alarm tick, the first time a claim fills every slot, starts `maxParallelTicks − 1` more
 * invocations of the Worker through a service binding to itself (`SKIPLOCK_SELF`): each is a
 * request of its own, with its own six connections and subrequests, that answers 202 at once and
 * ticks in its waitUntil until idle or until the alarm's deadline (so that all end together).
 * Alarms never overlap, and only an alarm starts them: never more than maxParallelTicks at once
 * (besides the ticks enqueues start themselves). The next alarm, due now while the backlog lasts,
 * starts the next round; when the backlog is gone no claim fills its slots and none are started.
 */
import { bearerToken, safeEqual } from '../../http/auth.ts';
import { normalizeBasePath } from '../../http/mount.ts';
import type { TickOptions } from '../../runtime/tick/index.ts';
import type { Deployment, Env } from './deployment.ts';
import { inBackground } from './wait-until.ts';

/** Marks a fan-out request; its value is the alarm's deadline (epoch ms). */
export const FAN_OUT_HEADER = 'x-skiplock-fan-out';
const FAN_OUT_PATH = '/v1/tick';

/** The alarm tick's onBacklog: starts the other invocations (undefined when there is nothing to start them with). */
export function fanOutOnBacklog(env: Env, deployment: Deployment, deadline: number): TickOptions['onBacklog'] {
  const self = env.SKIPLOCK_SELF;
  if (!self || deployment.maxParallelTicks <= 1) return undefined;
  const url = `https://skiplock${normalizeBasePath(deployment.basePath)}${FAN_OUT_PATH}`;
  let started = false;
  return () => {
    if (started) return; // once per alarm: later full claims of the same tick start nothing more
    started = true;
    console.log(`[skiplock] backlog: starting ${deployment.maxParallelTicks - 1} more tick invocations`);
    for (let i = 1; i < deployment.maxParallelTicks; i += 1) {
      const request = new Request(url, { method: 'POST', headers: { authorization: `Bearer ${env.API_TOKEN}`, [FAN_OUT_HEADER]: String(deadline) } });
      inBackground(self.fetch(request).then((response) => response.body?.cancel(), (error: unknown) => console.error('[skiplock] starting a tick for the backlog failed', error)));
    }
  };
}

/** Serves a fan-out request (202, the tick in waitUntil), or resolves undefined for any other request. */
export async function serveFanOut(request: Request, env: Env, deployment: Deployment): Promise<Response | undefined> {
  const deadline = Number(request.headers.get(FAN_OUT_HEADER));
  if (request.method !== 'POST' || !(deadline > 0) || new URL(request.url).pathname !== `${normalizeBasePath(deployment.basePath)}${FAN_OUT_PATH}`) return undefined;
  // A source held for wrong tokens gets the app's 429 here too: this route must not tell it a right token from a wrong one.
  if (deployment.tokenGuard.held(request, env)) return undefined;
  const token = bearerToken(request.headers.get('authorization') ?? undefined);
  if (token === undefined || !env.API_TOKEN || !(await safeEqual(token, env.API_TOKEN))) return undefined; // the app answers 401
  const budgetMs = Math.min(deployment.alarmTick.budgetMs ?? 25_000, Math.floor(deadline - Date.now()));
  if (budgetMs <= (deployment.alarmTick.marginMs ?? 1_000)) return new Response(null, { status: 204 });
  // It concludes into the deployment's store, which forwards to the Durable Object what it did not
  // know (retries' instants, woken parents): one request, kept out of the tick's subrequests.
  const { subrequestLimit } = deployment.alarmTick;
  const tick = { ...deployment.alarmTick, budgetMs, untilIdle: true, force: true, store: deployment.store, ...(subrequestLimit !== undefined && { subrequestLimit: subrequestLimit - 1 }) };
  inBackground(deployment.skiplock.tickIfDue(tick).catch((error: unknown) => console.error('[skiplock] fan-out tick failed', error)));
  return new Response(null, { status: 202 });
}
