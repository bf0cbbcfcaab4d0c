/**
 * The Cloudflare Worker: the HTTP API on `fetch` (an enqueue starts a tick with waitUntil), and
 * the tick on the minute cron (`scheduled`), which keeps ticking for TICK_BUDGET_MS so a job
 * that becomes due mid-minute starts within about a second. Budgets and limits: deployment.ts.
 */
import { deploymentFor, wakeTicker, type Env } from './deployment.ts';
import type { ExecutionContext, ScheduledController } from './runtime-types.ts';

export { SkiplockTicker } from './ticker.ts';

export default {
  fetch(request: Request, env: Env, ctx: ExecutionContext): Response | Promise<Response> {
    return deploymentFor(env).app.fetch(request, env, ctx);
  },

  async scheduled(_controller: ScheduledController, env: Env): Promise<void> {
    const { skiplock, cronTick, alarmMode } = deploymentFor(env);
    // In alarm mode the Durable Object ticks; the cron only makes sure it is awake.
    if (alarmMode) await wakeTicker(env);
    else await skiplock.tick(cronTick);
  },
};
