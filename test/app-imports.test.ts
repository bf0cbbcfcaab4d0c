/**
 * This repository dogfoods the package: its Worker, Vercel function, Node runner, CLI (src/app),
 * its tasks (src/tasks) and `npm start` (src/dev/local-stack.ts) import only the public entry
 * points — the modules package.json `exports` maps — exactly as a user's project does. A deep
 * import into src internals fails here.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect, test } from 'vitest';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const SRC = join(ROOT, 'src');
const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
  exports: Record<string, string | { import: string }>;
  bin: Record<string, string>;
};

/** src/x.ts for every entry point (dist/x.js in package.json), plus the CLI (the bin). */
const ENTRY_MODULES = new Set(
  [...Object.values(pkg.exports).flatMap((target) => (typeof target === 'string' ? [] : [target.import])), ...Object.values(pkg.bin)]
    .map((path) => join(ROOT, path.replace(/^\.\//, '').replace(/^dist\//, 'src/').replace(/\.js$/, '.ts'))),
);
/** The project's own code, which the app files may import (the user's side of the line). */
const PROJECT_DIRS = [join(SRC, 'app'), join(SRC, 'tasks')];
const APP_FILES = [
  ...PROJECT_DIRS.flatMap((dir) => readdirSync(dir).filter((name) => name.endsWith('.ts')).map((name) => join(dir, name))),
  join(SRC, 'dev', 'local-stack.ts'),
];

function relativeImports(file: string): string[] {
  const text = readFileSync(file, 'utf8');
  return [...text.matchAll(/(?:^|\n)\s*(?:import|export)\s[^'"]*?from\s+['"](\.[^'"]+)['"]|(?:^|\n)\s*import\s+['"](\.[^'"]+)['"]/g)].map((m) => (m[1] ?? m[2])!);
}

/** A deep import: into src, but neither an entry module nor the project's own code. */
function deepImports(file: string): string[] {
  return relativeImports(file).filter((specifier) => {
    const target = resolve(dirname(file), specifier);
    if (!target.startsWith(SRC)) return false;
    if (ENTRY_MODULES.has(target)) return false;
    if (PROJECT_DIRS.some((dir) => target.startsWith(`${dir}/`))) return false;
    // npm start's own helpers (embedded PostgreSQL, the Neon proxy, wrangler dev) live beside it.
    if (file.endsWith('local-stack.ts') && dirname(target) === dirname(file)) return false;
    return true;
  });
}

test('the entry modules exist for every export', () => {
  for (const entry of ENTRY_MODULES) expect(readFileSync(entry, 'utf8').length, relative(ROOT, entry)).toBeGreaterThan(0);
});

test('the Worker, the Vercel function, the Node runner, the CLI, the tasks and npm start import only entry points', () => {
  expect(APP_FILES.map((f) => relative(ROOT, f))).toEqual(expect.arrayContaining(['src/app/worker.ts', 'src/app/vercel.ts', 'src/app/node.ts', 'src/app/cli.ts']));
  const found = Object.fromEntries(APP_FILES.map((file) => [relative(ROOT, file), deepImports(file)]).filter(([, deep]) => (deep as string[]).length > 0));
  expect(found).toEqual({});
});

test('the deployments point at the app files', () => {
  expect(readFileSync(join(ROOT, 'wrangler.toml'), 'utf8')).toMatch(/^main = "src\/app\/worker\.ts"$/m);
  expect(JSON.parse(readFileSync(join(ROOT, 'vercel.json'), 'utf8')).builds[0].src).toBe('src/app/vercel.ts');
});

test('the check itself catches a deep import', () => {
  const probe = join(SRC, 'app', 'worker.ts');
  expect(relativeImports(probe).length).toBeGreaterThan(0);
  const fake = (specifier: string) => !ENTRY_MODULES.has(resolve(dirname(probe), specifier)) && !resolve(dirname(probe), specifier).startsWith(join(SRC, 'tasks'));
  expect(fake('../runtime/skiplock.ts')).toBe(true);
  expect(fake('../cloudflare.ts')).toBe(false);
});
