/**
 * The local stack of `npm start` (entry: start.ts), with no cloud account (CONTRACT.md):
 *   embedded PostgreSQL (data in .skiplock/postgres, reused) unless DATABASE_URL is set
 *   → migrations → the local Neon proxy → the Worker in workerd (`wrangler dev`), reaching
 *   Postgres through @neondatabase/serverless as in production → a local cron driver (/__scheduled
 *   every minute). `npm run start:node` (--node) serves the Node runner instead of the last three.
 * It prints the URL and the API token when ready; SIGINT/SIGTERM stops everything it started.
 */
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { join } from 'node:path';
// The public entry points only, as a user's project would (the Worker side: src/app/worker.ts).
import { createSkiplock, type Schedule } from '../index.ts';
import { migrate, migrations } from '../migrations.ts';
import { intFromEnv, onShutdownSignal, startNodeRunner } from '../node.ts';
import { createPgDriver } from '../pg.ts';
import { schedules, tasks } from '../tasks/index.ts';
import { startCronDriver } from './cron-driver.ts';
import { handleShutdownSignalsHere, startLocalPostgres } from './embedded-postgres.ts';
import { startNeonProxy } from './neon-proxy.ts';
import { PROJECT_ROOT, startWranglerDev } from './wrangler-dev.ts';

const STATE_DIR = join(PROJECT_ROOT, '.skiplock');
const DATABASE = 'skiplock';
const env = process.env;
const useNode = process.argv.includes('--node');
const port = intFromEnv(env.PORT, 8787, 'PORT');

// Everything started so far, stopped in reverse order on exit.
const cleanups: (() => Promise<unknown>)[] = [];
const startup = new AbortController();

async function started<T>(value: Promise<T>, stop: (value: T) => Promise<unknown>): Promise<T> {
  const resolved = await value;
  cleanups.push(() => stop(resolved));
  startup.signal.throwIfAborted();
  return resolved;
}

/** Stops what started, last first; a part that does not stop within 10 s is left behind, with a warning. */
async function stopAll(): Promise<void> {
  for (let stop = cleanups.pop(); stop; stop = cleanups.pop()) {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const givenUp = new Promise<void>((resolve) => {
      timer = setTimeout(() => {
        console.error('[start] a part did not stop within 10 s; going on');
        resolve();
      }, 10_000);
    });
    await Promise.race([stop().catch((error: unknown) => console.error('[start] stopping:', error)), givenUp]);
    clearTimeout(timer);
  }
}

async function main(): Promise<{ url: string; token: string; database: string }> {
  await mkdir(STATE_DIR, { recursive: true });
  await assertPortFree(port);
  const token = env.API_TOKEN || (await localToken());

  let databaseUrl = env.DATABASE_URL;
  let database = 'DATABASE_URL';
  if (!databaseUrl) {
    const pg = await started(startLocalPostgres({ dir: join(STATE_DIR, 'postgres') }), (pg) => pg.stop());
    await createDatabaseIfMissing(pg.url, DATABASE);
    databaseUrl = pg.urlFor(DATABASE);
    database = `embedded PostgreSQL in .skiplock/postgres (port ${pg.port})`;
  }

  const sql = await started(Promise.resolve(createPgDriver(databaseUrl, { max: 5 })), (sql) => sql.close());
  const { applied } = await migrate(sql, migrations);
  if (applied.length > 0) console.log(`[start] applied migrations ${applied.join(', ')}`);

  if (useNode) {
    const skiplock = createSkiplock({ sql, tasks, schedules });
    const runner = await started(
      startNodeRunner({ skiplock, apiToken: token, cronSecret: env.CRON_SECRET, port, drainMs: 3_000 }),
      (runner) => runner.stop(),
    );
    return { url: runner.url, token, database };
  }

  const proxy = await started(startNeonProxy(), (proxy) => proxy.close());
  const worker = await started(
    startWranglerDev({
      port,
      persistTo: join(STATE_DIR, 'wrangler'),
      vars: {
        DATABASE_URL: databaseUrl,
        NEON_FETCH_ENDPOINT: proxy.fetchEndpoint,
        API_TOKEN: token,
        ...(env.CRON_SECRET ? { CRON_SECRET: env.CRON_SECRET } : {}),
      },
      signal: startup.signal,
    }),
    (worker) => worker.stop(),
  );
  const cron = startCronDriver(worker.url, (message) => console.error(`[start] ${message}`));
  cleanups.push(async () => cron.stop());
  return { url: worker.url, token, database: `${database}, reached through the local Neon proxy` };
}

/** The token kept in .skiplock/api-token, created on first use, so that it survives restarts like the data. */
async function localToken(): Promise<string> {
  const file = join(STATE_DIR, 'api-token');
  if (existsSync(file)) return (await readFile(file, 'utf8')).trim();
  const token = randomBytes(24).toString('base64url');
  await writeFile(file, `${token}\n`, { mode: 0o600 });
  return token;
}

async function createDatabaseIfMissing(adminUrl: string, name: string): Promise<void> {
  const admin = createPgDriver(adminUrl, { max: 1 });
  try {
    const rows = await admin.query({ text: `SELECT 1 FROM pg_database WHERE datname = $1`, values: [name] });
    if (rows.length === 0) await admin.query({ text: `CREATE DATABASE ${name}`, values: [] });
  } finally {
    await admin.close();
  }
}

function assertPortFree(port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', () => reject(new Error(`port ${port} is in use: stop what uses it or set PORT`)));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve()));
  });
}

function describeTiming({ timing }: Schedule): string {
  const tz = timing.tz === 'UTC' ? ' UTC' : ` ${timing.tz}`;
  if (timing.cron !== null) return `cron ${timing.cron}${tz}`;
  if (timing.everyMs !== null) return `every ${timing.everyMs / 1000} s`;
  return `daily at ${(timing.daily ?? []).join(', ')}${tz}`;
}

function printReady({ url, token, database }: { url: string; token: string; database: string }): void {
  console.log(`
skiplock is running: ${useNode ? 'the Node runner, ticking every second' : 'the Worker in workerd (wrangler dev), ticked by a local minute cron'}
  URL        ${url}   (dashboard: ${url}/ , API docs: ${url}/openapi.json)
  API token  ${token}
  database   ${database}
  tasks      ${tasks.map((t) => t.name).join(', ')}
  schedules  ${schedules.map((s) => `${s.name} (${describeTiming(s)} → ${s.task})`).join(', ')}

  curl -X POST ${url}/v1/jobs -H 'authorization: Bearer ${token}' -H 'content-type: application/json' \\
       -d '{"task":"echo","payload":{"message":"hello"}}'

Ctrl-C stops everything.`);
}

/** Starts the stack; returns what stops it (also on SIGINT/SIGTERM). */
export function runLocalStack(): (reason: NodeJS.Signals) => void {
  handleShutdownSignalsHere();
  const running = main();
  const stop = onShutdownSignal(async (signal) => {
    console.log(`\n[start] ${signal}: stopping`);
    startup.abort();
    await running.catch(() => {});
    await stopAll();
  });
  running.then(printReady, async (error: unknown) => {
    if (startup.signal.aborted) return; // a signal arrived during startup; the handler stops what started
    console.error('[start] failed:', error);
    await stopAll();
    process.exit(1);
  });
  return stop;
}
