/**
 * The build's copy of @hono/zod-openapi (src/dev/vendor-zod-openapi.ts): the package's own module,
 * changed only where it hands zod to extendZodWithOpenApi, and refused for any other version.
 */
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { expect, test } from 'vitest';
import { vendoredZodOpenApi } from '../../src/dev/vendor-zod-openapi.ts';

const source = await readFile(fileURLToPath(import.meta.resolve('@hono/zod-openapi')), 'utf8');

test('extends zod with { ZodType } and imports nothing else from zod; the rest is the module as published', () => {
  const text = vendoredZodOpenApi(source, '1.6.3');
  expect(text).toContain('extendZodWithOpenApi({ ZodType });');
  expect([...text.matchAll(/^import .* from "zod";$/gm)].map((m) => m[0])).toEqual(['import { ZodType } from "zod";']);
  expect(text).not.toMatch(/extendZodWithOpenApi\(z\)|sourceMappingURL/);
  const changed = new Set(['import { z } from "zod";', 'extendZodWithOpenApi(z);', '//# sourceMappingURL=index.mjs.map']);
  const kept = source.split('\n').filter((line) => !changed.has(line) && !line.startsWith('export {'));
  expect(kept.every((line) => text.includes(line))).toBe(true);
});

test('another version, or a text not found exactly once, fails the build', () => {
  expect(() => vendoredZodOpenApi(source, '1.6.4')).toThrow(/1\.6\.4 installed, 1\.6\.3 expected/);
  expect(() => vendoredZodOpenApi(source.replace('extendZodWithOpenApi(z);', ''), '1.6.3')).toThrow(/found 0 times/);
});
