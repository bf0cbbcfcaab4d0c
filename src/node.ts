/**
 * `skiplock/node`: a long-running Node process that serves the HTTP API and ticks every second.
 *
 *   import { createSkiplock } from 'skiplock';
 *   import { createPgDriver } from 'skiplock/pg';
 *   import { onShutdownSignal, startNodeRunner } from 'skiplock/node';
 *   const skiplock = createSkiplock({ sql: createPgDriver(process.env.DATABASE_URL!), tasks, schedules });
 *   await skiplock.migrate(migrations);          // import { migrations } from 'skiplock/migrations'
 *   const runner = await startNodeRunner({ skiplock, apiToken: process.env.API_TOKEN!, port: 8787 });
 *   onShutdownSignal(() => runner.stop());
 */
export { DEFAULT_DRAIN_MS, startNodeRunner, type NodeRunner, type NodeRunnerOptions } from './platform/node/runner.ts';
export { onShutdownSignal } from './platform/node/signals.ts';
export {
  ConfigError,
  configErrorLine,
  databaseUrlFromEnv,
  idleCheckMsFromEnv,
  intFromEnv,
  portFromEnv,
  requiredEnv,
  secretFromEnv,
  tickOptionsFromEnv,
  type TickEnv,
} from './platform/env-options.ts';
