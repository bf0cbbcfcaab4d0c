/**
 * The package as a user gets it: `npm pack` (prepack builds dist/), then a temporary copy of an
 * example with the tarball extracted as node_modules/skiplock and every other dependency linked
 * from this repository's node_modules — nothing is downloaded. A linked dependency must be the
 * version the example pins, so the examples' package.json files stay true.
 */
import { execFile, type ExecFileOptions } from 'node:child_process';
import { chmod, cp, mkdir, mkdtemp, readdir, readFile, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { promisify } from 'node:util';

export const ROOT = resolve(import.meta.dirname, '../..');
/** The repository's Node (the `node` devDependency), as npm scripts use it. */
export const NODE = join(ROOT, 'node_modules/.bin/node');
export const BIN = join(ROOT, 'node_modules/.bin');

const run = promisify(execFile);

export interface RunResult {
  stdout: string;
  stderr: string;
}

/** Runs a command with the repository's node first on PATH; rejects with its output on failure. */
export async function sh(file: string, args: readonly string[], options: ExecFileOptions & { env?: NodeJS.ProcessEnv } = {}): Promise<RunResult> {
  try {
    const { stdout, stderr } = await run(file, [...args], {
      maxBuffer: 64 * 1024 * 1024,
      ...options,
      env: { ...process.env, PATH: `${BIN}:${process.env.PATH}`, ...options.env },
      encoding: 'utf8',
    });
    return { stdout: String(stdout), stderr: String(stderr) };
  } catch (error) {
    const { stdout = '', stderr = '' } = error as { stdout?: string; stderr?: string };
    throw new Error(`${file} ${args.join(' ')} failed:\n${stdout}\n${stderr}`.slice(0, 20_000), { cause: error });
  }
}

export interface PackedPackage {
  tarball: string;
  /** Size of the .tgz in bytes. */
  size: number;
  /** Paths inside the package. */
  files: string[];
  manifest: { name: string; private?: boolean; repository?: unknown; dependencies?: Record<string, string>; exports?: Record<string, unknown>; bin?: unknown; files?: string[] };
  dir: string;
}

/**
 * `npm pack` into a temporary directory (runs prepack, which builds dist/). SKIPLOCK_TARBALL
 * names an already packed .tgz to test instead.
 */
export async function pack(): Promise<PackedPackage> {
  const dir = await mkdtemp(join(tmpdir(), 'skiplock-pack-'));
  await chmod(dir, 0o755);
  let tarball = process.env.SKIPLOCK_TARBALL;
  if (!tarball) {
    await sh('npm', ['pack', '--pack-destination', dir], { cwd: ROOT });
    const [filename] = (await readdir(dir)).filter((name) => name.endsWith('.tgz'));
    tarball = join(dir, filename!);
  }
  await sh('tar', ['-xzf', tarball, '-C', dir]);
  const files = (await sh('tar', ['-tzf', tarball])).stdout.split('\n').filter((f) => f && !f.endsWith('/')).map((f) => f.replace(/^package\//, ''));
  const manifest = JSON.parse(await readFile(join(dir, 'package', 'package.json'), 'utf8')) as PackedPackage['manifest'];
  return { tarball, size: (await stat(tarball)).size, files, manifest, dir };
}

interface ExampleManifest {
  dependencies?: Record<string, string>;
  devDependencies?: Record<string, string>;
}

/**
 * A temporary copy of examples/<name> with its dependencies installed as described above
 * ('bare': a project that depends on skiplock alone, so no optional peer is installed).
 * Returns its directory.
 */
export async function installExample(name: string, packed: PackedPackage): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), `skiplock-example-${name}-`));
  await chmod(dir, 0o755); // embedded PostgreSQL as root: the postgres user must traverse it
  if (name === 'bare') await writeFile(join(dir, 'package.json'), `${JSON.stringify({ name: 'bare', private: true, type: 'module', dependencies: { skiplock: '*' } })}\n`);
  else await cp(join(ROOT, 'examples', name), dir, { recursive: true, filter: (src) => !/[/\\](node_modules|dist|\.next|\.wrangler|\.skiplock)$/.test(src) });
  const modules = join(dir, 'node_modules');
  await mkdir(join(modules, 'skiplock'), { recursive: true });
  await sh('tar', ['-xzf', packed.tarball, '-C', join(modules, 'skiplock'), '--strip-components=1']);

  const example = JSON.parse(await readFile(join(dir, 'package.json'), 'utf8')) as ExampleManifest;
  const wanted = new Map<string, string | undefined>();
  for (const [dep, version] of Object.entries({ ...example.dependencies, ...example.devDependencies })) if (dep !== 'skiplock') wanted.set(dep, version);
  // What npm would install for skiplock itself: its dependencies (optional peers only where the example asks for them).
  for (const dep of Object.keys(packed.manifest.dependencies ?? {})) if (!wanted.has(dep)) wanted.set(dep, undefined);

  for (const [dep, version] of wanted) {
    const source = join(ROOT, 'node_modules', dep);
    const installed = JSON.parse(await readFile(join(source, 'package.json'), 'utf8').catch(() => '{}')) as { version?: string };
    if (installed.version === undefined) throw new Error(`${name} needs ${dep}, which this repository does not have in node_modules (add it as a pinned devDependency)`);
    if (version !== undefined && installed.version !== version)
      throw new Error(`examples/${name} pins ${dep}@${version} but this repository has ${installed.version}: make them the same`);
    await mkdir(dirname(join(modules, dep)), { recursive: true });
    await symlink(source, join(modules, dep), 'dir');
  }
  // npm links the package's bin into node_modules/.bin: `npx skiplock` runs it.
  await mkdir(join(modules, '.bin'), { recursive: true });
  for (const [command, path] of Object.entries(binOf(packed.manifest))) await symlink(join('..', 'skiplock', path), join(modules, '.bin', command));
  return dir;
}

function binOf(manifest: PackedPackage['manifest']): Record<string, string> {
  if (typeof manifest.bin === 'string') return { [manifest.name]: manifest.bin };
  return (manifest.bin ?? {}) as Record<string, string>;
}

export async function removeDir(dir: string | undefined): Promise<void> {
  if (dir) await rm(dir, { recursive: true, force: true });
}
