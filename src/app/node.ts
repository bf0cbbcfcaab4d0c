/**
 * This repository's self-hosted Node runner, built from the public entry points only:
 * `DATABASE_URL=postgres://… API_TOKEN=… node src/app/node.ts`. Migrates, then serves the API and
 * ticks when work is due until SIGINT or SIGTERM (graceful: running jobs get DRAIN_MS to finish, the
 * rest go back to the queue). Runs the tasks and schedules of src/tasks/index.ts. A variable set
 * wrongly, or a database it cannot reach, is one line on stderr and exit code 1.
 */
import { createSkiplock } from '../index.ts';
import { migrations } from '../migrations.ts';
import {
  ConfigError,
  configErrorLine,
  DEFAULT_DRAIN_MS,
  databaseUrlFromEnv,
  idleCheckMsFromEnv,
  intFromEnv,
  onShutdownSignal,
  portFromEnv,
  secretFromEnv,
  startNodeRunner,
  tickOptionsFromEnv,
} from '../node.ts';
import { createPgDriver } from '../pg.ts';
import { schedules, tasks } from '../tasks/index.ts';

const env = process.env;
let databaseUrl: string | undefined;

async function main(): Promise<void> {
  databaseUrl = databaseUrlFromEnv(env.DATABASE_URL);
  // A process of its own: a missing or short secret stops it at start, with one line.
  const apiToken = secretFromEnv(env.API_TOKEN, 'API_TOKEN', true)!;
  const cronSecret = secretFromEnv(env.CRON_SECRET, 'CRON_SECRET', false);
  const metricsToken = secretFromEnv(env.METRICS_TOKEN, 'METRICS_TOKEN', false);
  const port = portFromEnv(env.PORT, 8787);
  const drainMs = intFromEnv(env.DRAIN_MS, DEFAULT_DRAIN_MS, 'DRAIN_MS');
  // TICK_BUDGET_MS is the budget of /v1/tick and of an enqueue's tick; the loop's ticks run until idle.
  const tick = tickOptionsFromEnv(env, { budgetMs: 30_000, pollIntervalMs: 1_000 });

  const sql = createPgDriver(databaseUrl);
  // Stream read tokens (skiplock.streamToken) are signed with CALLBACK_SECRET, or else API_TOKEN.
  const streamTokens = { secret: secretFromEnv(env.CALLBACK_SECRET, 'CALLBACK_SECRET', false) ?? apiToken };
  const skiplock = createSkiplock({ sql, tasks, schedules, idleCheckMs: idleCheckMsFromEnv(env.IDLE_CHECK_MS), streamTokens });
  await skiplock.migrate(migrations);
  const runner = await startNodeRunner({
    skiplock,
    apiToken,
    cronSecret,
    metricsToken,
    port,
    hostname: env.HOST ?? '0.0.0.0',
    tick,
    requestTickBudgetMs: tick.budgetMs,
    ...(env.STREAM_CONNECTION_MS ? { streamConnectionMs: intFromEnv(env.STREAM_CONNECTION_MS, 25_000, 'STREAM_CONNECTION_MS') } : {}),
    drainMs,
  }).catch((error: unknown) => {
    if ((error as NodeJS.ErrnoException).code === 'EADDRINUSE') throw new ConfigError(`PORT ${port} is in use: stop what uses it or set PORT`);
    throw error;
  });
  onShutdownSignal(async (signal) => {
    console.log(`[skiplock] ${signal}: draining`);
    await runner.stop();
    await sql.close();
  });
}

try {
  await main();
} catch (error) {
  const line = configErrorLine(error, databaseUrl);
  if (line === undefined) throw error;
  console.error(`[skiplock] ${line}`);
  process.exit(1);
}
