/**
 * Issue 32, item 3: short units a reader can hold at once. No hand-written source file in src/ is
 * over 400 lines (the generated migrations data excepted), and no function — declaration, method,
 * arrow or expression, a nested one counted by itself — is over 60 lines. A unit that grows past
 * either fails here with its place, so it is cut by meaning when it grows, not in a later clean-up.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { expect, test } from 'vitest';

const SRC = fileURLToPath(new URL('../src/', import.meta.url));
const MAX_FILE_LINES = 400;
const MAX_FUNCTION_LINES = 60;
const GENERATED = new Set(['store/migrations-data.ts']);

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return /\.tsx?$/.test(entry.name) && !entry.name.endsWith('.d.ts') ? [path] : [];
  });
}

const files = sourceFiles(SRC)
  .map((path) => ({ name: relative(SRC, path).split('\\').join('/'), text: readFileSync(path, 'utf8') }))
  .filter((file) => !GENERATED.has(file.name));

function lineCount(text: string): number {
  return text.endsWith('\n') ? text.split('\n').length - 1 : text.split('\n').length;
}

function functionName(node: ts.Node, source: ts.SourceFile): string {
  const named = node as { name?: ts.Node };
  if (named.name) return named.name.getText(source);
  const parent = node.parent as { name?: ts.Node } | undefined;
  return parent?.name ? parent.name.getText(source) : '(anonymous)';
}

function longFunctions(name: string, text: string): string[] {
  const source = ts.createSourceFile(name, text, ts.ScriptTarget.Latest, true);
  const found: string[] = [];
  const visit = (node: ts.Node): void => {
    if (ts.isFunctionLike(node) && 'body' in node && node.body) {
      const first = source.getLineAndCharacterOfPosition(node.getStart(source)).line;
      const last = source.getLineAndCharacterOfPosition(node.getEnd()).line;
      const lines = last - first + 1;
      if (lines > MAX_FUNCTION_LINES) found.push(`${name}:${first + 1} ${functionName(node, source)} (${lines} lines)`);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

test(`no hand-written source file is over ${MAX_FILE_LINES} lines`, () => {
  const long = files.filter((file) => lineCount(file.text) > MAX_FILE_LINES).map((file) => `${file.name} (${lineCount(file.text)} lines)`);
  expect(long).toEqual([]);
});

test(`no function is over ${MAX_FUNCTION_LINES} lines`, () => {
  expect(files.flatMap((file) => longFunctions(file.name, file.text))).toEqual([]);
});

test('the check sees the source', () => {
  expect(files.length).toBeGreaterThan(100);
  expect(longFunctions('probe.ts', `function probe() {\n${'  f();\n'.repeat(MAX_FUNCTION_LINES)}}\n`)).toEqual(['probe.ts:1 probe (62 lines)']);
});
