/**
 * The local stack of `npm start` (entry: start.ts), with no cloud account (CONTRACT.md):
 *   embedded PostgreSQL (data in .skiplock/postgres, reused) unless DATABASE_URL is set
 *   → migrations → the local Neon proxy → the Worker in workerd (`wrangler dev`), reaching
 *   Postgres through @neondatabase/serverless as in production → a local cron driver (/__scheduled
 *   every minute). `npm run start:node` (--node) serves the Node runner instead of the last three.
 * It prints the URL, the API token and (for the embedded PostgreSQL) a DATABASE_URL for the CLI
 * when ready; SIGINT/SIGTERM stops everything it started. A bad PORT or DATABASE_URL is one line.
 */
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { join } from 'node:path';
// The public entry points only, as a user's project would (the Worker side: src/app/worker.ts).
import { createSkiplock, type Schedule } from '../index.ts';
import { migrate, migrations } from '../migrations.ts';
import { ConfigError, configErrorLine, databaseUrlFromEnv, onShutdownSignal, portFromEnv, startNodeRunner } from '../node.ts';
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
// The connection string startup uses, for describing a failure to connect in one line.
let connectingTo: string | undefined;

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

interface Ready {
  url: string;
  token: string;
  database: string;
  /** The connection string for the CLI, when this stack made the database (the user has their own). */
  cliDatabaseUrl?: string;
}

async function main(): Promise<Ready> {
  const port = portFromEnv(env.PORT, 8787);
  let databaseUrl = env.DATABASE_URL ? databaseUrlFromEnv(env.DATABASE_URL) : undefined;
  await mkdir(STATE_DIR, { recursive: true });
  await assertPortFree(port);
  const token = env.API_TOKEN || (await localToken());

  let database = 'DATABASE_URL';
  let cliDatabaseUrl: string | undefined;
  if (!databaseUrl) {
    const pg = await started(startLocalPostgres({ dir: join(STATE_DIR, 'postgres') }), (pg) => pg.stop());
    await createDatabaseIfMissing(pg.url, DATABASE);
    databaseUrl = cliDatabaseUrl = pg.urlFor(DATABASE);
    database = `embedded PostgreSQL in .skiplock/postgres (port ${pg.port}; password in .skiplock/postgres.password)`;
  }

  connectingTo = databaseUrl;
  const sql = await started(Promise.resolve(createPgDriver(databaseUrl, { max: 5 })), (sql) => sql.close());
  const { applied } = await migrate(sql, migrations);
  if (applied.length > 0) console.log(`[start] applied migrations ${applied.join(', ')}`);

  if (useNode) {
    const skiplock = createSkiplock({ sql, tasks, schedules });
    const runner = await started(
      startNodeRunner({ skiplock, apiToken: token, cronSecret: env.CRON_SECRET, port, drainMs: 3_000 }),
      (runner) => runner.stop(),
    );
    return { url: runner.url, token, database, cliDatabaseUrl };
  }

  // Only the Worker (no Origin) calls it; no web page but the app's own may send it a request.
  const appOrigins = [`http://127.0.0.1:${port}`, `http://localhost:${port}`];
  const proxy = await started(startNeonProxy({ allowedOrigins: appOrigins }), (proxy) => proxy.close());
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
  return { url: worker.url, token, database: `${database}, reached through the local Neon proxy`, cliDatabaseUrl };
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
    server.once('error', () => reject(new ConfigError(`PORT ${port} is in use: stop what uses it or set PORT`)));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve()));
  });
}

function describeTiming({ timing }: Schedule): string {
  const tz = timing.tz === 'UTC' ? ' UTC' : ` ${timing.tz}`;
  if (timing.cron !== null) return `cron ${timing.cron}${tz}`;
  if (timing.everyMs !== null) return `every ${timing.everyMs / 1000} s`;
  return `daily at ${(timing.daily ?? []).join(', ')}${tz}`;
}

function printReady({ url, token, database, cliDatabaseUrl }: Ready): void {
  // Single quotes for the shell: the URL has none (base64url password, fixed user and database).
  const cli = cliDatabaseUrl === undefined ? '' : `
  CLI        export DATABASE_URL='${cliDatabaseUrl}'
             npm run cli -- jobs --status dead`;
  console.log(`
skiplock is running: ${useNode ? 'the Node runner, ticking every second' : 'the Worker in workerd (wrangler dev), ticked by a local minute cron'}
  URL        ${url}   (dashboard: ${url}/ , API docs: ${url}/openapi.json)
  API token  ${token}
  database   ${database}
  tasks      ${tasks.map((t) => t.name).join(', ')}
  schedules  ${schedules.map((s) => `${s.name} (${describeTiming(s)} → ${s.task})`).join(', ')}

  curl -X POST ${url}/v1/jobs -H 'authorization: Bearer ${token}' -H 'content-type: application/json' \\
       -d '{"task":"echo","payload":{"message":"hello"}}'
  A durable workflow (docs/steps.md), its day's wait cut to 10 s; open it on the dashboard:
  curl -X POST ${url}/v1/jobs -H 'authorization: Bearer ${token}' -H 'content-type: application/json' \\
       -d '{"task":"signup-workflow","payload":{"email":"ada@example.com","waitMs":10000}}'
${cli}

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
    const line = configErrorLine(error, connectingTo);
    if (line === undefined) console.error('[start] failed:', error);
    else console.error(`[start] ${line}`);
    await stopAll();
    process.exit(1);
  });
  return stop;
}
