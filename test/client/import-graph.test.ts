/**
 * skiplock/client imports no server code: compiled as the package compiles it (type-only imports
 * erased), the modules it loads at run time are only those of src/client, and no package at all.
 */
import { readFileSync } from 'node:fs';
import { dirname, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { expect, test } from 'vitest';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

/** Every module `entry` loads at run time, following relative imports of the compiled JavaScript. */
export function runtimeImportGraph(entry: string): { files: string[]; packages: string[] } {
  const files = new Set<string>();
  const packages = new Set<string>();
  const visit = (file: string) => {
    if (files.has(file)) return;
    files.add(file);
    const { outputText } = ts.transpileModule(readFileSync(file, 'utf8'), {
      fileName: file,
      compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2023, verbatimModuleSyntax: true, rewriteRelativeImportExtensions: true },
    });
    for (const { fileName } of ts.preProcessFile(outputText, true, true).importedFiles) {
      if (fileName.startsWith('.')) visit(resolve(dirname(file), fileName.replace(/\.js$/, '.ts')));
      else packages.add(fileName);
    }
  };
  visit(resolve(root, entry));
  return { files: [...files].map((f) => relative(root, f)).sort(), packages: [...packages].sort() };
}

test('the client loads only src/client and no package', () => {
  const graph = runtimeImportGraph('src/client/index.ts');
  expect(graph.packages).toEqual([]);
  expect(graph.files).toEqual(['src/client/client.ts', 'src/client/errors.ts', 'src/client/index.ts', 'src/client/sse.ts', 'src/client/stream.ts']);
});

test('the scan sees run-time imports (it finds the server behind the app)', () => {
  const graph = runtimeImportGraph('src/http/app.ts');
  expect(graph.packages).toContain('@hono/zod-openapi');
  expect(graph.files).toContain('src/http/routes/jobs.ts');
});
