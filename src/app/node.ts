/**
 * This repository's self-hosted Node runner, built from the public entry points only:
 * `DATABASE_URL=postgres://… API_TOKEN=… node src/app/node.ts`. Migrates, then serves the API and
 * ticks every second until SIGINT or SIGTERM (graceful: running jobs get DRAIN_MS to finish, the
 * rest go back to the queue). Runs the tasks and schedules of src/tasks/index.ts.
 */
import { createSkiplock } from '../index.ts';
import { migrations } from '../migrations.ts';
import { intFromEnv, onShutdownSignal, startNodeRunner, tickOptionsFromEnv } from '../node.ts';
import { createPgDriver } from '../pg.ts';
import { schedules, tasks } from '../tasks/index.ts';

const env = process.env;
if (!env.DATABASE_URL) throw new Error('DATABASE_URL is not set');
if (!env.API_TOKEN) throw new Error('API_TOKEN is not set');

const sql = createPgDriver(env.DATABASE_URL);
const skiplock = createSkiplock({ sql, tasks, schedules });
await skiplock.migrate(migrations);
// TICK_BUDGET_MS is the budget of /v1/tick and of an enqueue's tick; the loop's ticks run until idle.
const tick = tickOptionsFromEnv(env, { budgetMs: 30_000, pollIntervalMs: 1_000 });
const runner = await startNodeRunner({
  skiplock,
  apiToken: env.API_TOKEN,
  cronSecret: env.CRON_SECRET,
  port: intFromEnv(env.PORT, 8787, 'PORT'),
  hostname: env.HOST ?? '0.0.0.0',
  tick,
  requestTickBudgetMs: tick.budgetMs,
  drainMs: intFromEnv(env.DRAIN_MS, 10_000, 'DRAIN_MS'),
});
console.log(`[skiplock] listening on ${runner.url}`);
onShutdownSignal(async (signal) => {
  console.log(`[skiplock] ${signal}: draining`);
  await runner.stop();
  await sql.close();
});
