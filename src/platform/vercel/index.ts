/**
 * The HTTP API as a Vercel Function (Node.js runtime). vercel.json routes every path here, and
 * its cron calls GET /v1/tick with `Authorization: Bearer $CRON_SECRET` (any other caller needs
 * API_TOKEN). Each tick's budget comes from `maxDuration`; the tick an enqueue starts runs on
 * after the response through `waitUntil`, within the same limit.
 */
import { waitUntil } from '@vercel/functions';
import { createApp, longestJobTimeoutMs } from '../../http/app.ts';
import type { App } from '../../http/app-types.ts';
import { createSkiplock } from '../../runtime/skiplock.ts';
import { createNeonHttpDriver } from '../../store/drivers/neon-http.ts';
import { schedules, tasks } from '../../tasks/index.ts';
import { tickOptionsFromEnv } from '../env-options.ts';

/** Read by Vercel at build time: this function may run `maxDuration` seconds (Hobby allows up to 300 with Fluid compute). */
export const config = { maxDuration: 60 };
// Room for a cold start and the response, kept out of the tick's budget.
const HEADROOM_MS = 5_000;

let app: App | undefined;

function appFromEnv(env: NodeJS.ProcessEnv): App {
  if (!env.DATABASE_URL) throw new Error('DATABASE_URL is not set');
  if (!env.API_TOKEN) throw new Error('API_TOKEN is not set');
  const sql = createNeonHttpDriver(env.DATABASE_URL, env.NEON_FETCH_ENDPOINT ? { fetchEndpoint: env.NEON_FETCH_ENDPOINT } : {});
  const skiplock = createSkiplock({ sql, tasks, schedules });
  const tick = tickOptionsFromEnv(env, { budgetMs: config.maxDuration * 1000 - HEADROOM_MS, pollIntervalMs: 1_000 });
  return createApp({
    skiplock,
    apiToken: env.API_TOKEN,
    cronSecret: env.CRON_SECRET,
    tick,
    maxJobTimeoutMs: longestJobTimeoutMs(tick), // every tick here has this budget: a longer job is refused at enqueue
    runInBackground: (work) => waitUntil(work),
  });
}

export default {
  fetch(request: Request): Response | Promise<Response> {
    app ??= appFromEnv(process.env);
    return app.fetch(request);
  },
};
