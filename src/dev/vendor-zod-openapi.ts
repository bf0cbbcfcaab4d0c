/**
 * Part of `npm run build`: dist/http/zod-openapi.js becomes @hono/zod-openapi's own module
 * (src/http/zod-openapi.ts says why) with `extendZodWithOpenApi(z)` called on `{ ZodType }` and
 * its `z` re-export dropped (skiplock imports `z` from zod). Each replaced text must occur exactly
 * once in the pinned version, or the build fails: a new version is read again, not patched blindly.
 */
import { readFile, rm, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const PINNED = '1.6.3';
const REPLACEMENTS: readonly (readonly [string, string])[] = [
  ['import { z } from "zod";', 'import { ZodType } from "zod";'],
  ['extendZodWithOpenApi(z);', 'extendZodWithOpenApi({ ZodType });'],
  ['export { $, OpenAPIHono, createRoute, defineOpenAPIRoute, extendZodWithOpenApi, z };', 'export { $, OpenAPIHono, createRoute, defineOpenAPIRoute, extendZodWithOpenApi };'],
  ['\n//# sourceMappingURL=index.mjs.map', ''],
];

/** The module's text with the replacements made; throws when one is not found exactly once. */
export function vendoredZodOpenApi(source: string, version: string): string {
  if (version !== PINNED) throw new Error(`@hono/zod-openapi ${version} installed, ${PINNED} expected: read its dist/index.mjs again and update src/dev/vendor-zod-openapi.ts`);
  let text = source;
  for (const [from, to] of REPLACEMENTS) {
    const count = text.split(from).length - 1;
    if (count !== 1) throw new Error(`@hono/zod-openapi ${version}: ${JSON.stringify(from)} found ${count} times, expected once`);
    text = text.replace(from, to);
  }
  const header = [
    `// @hono/zod-openapi ${version} (MIT, https://github.com/honojs/middleware/tree/main/packages/zod-openapi), its dist/index.mjs`,
    '// written here by skiplock\'s build: zod is extended with `{ ZodType }`, not the whole `z` namespace,',
    '// which kept every export of zod (its locales included) in a bundle. See src/http/zod-openapi.ts.',
  ].join('\n');
  return `${header}\n${text}`;
}

/** Replaces tsc's dist/http/zod-openapi.js (a re-export) and drops its source map. */
export async function vendorZodOpenApi(dist: string): Promise<void> {
  const entry = fileURLToPath(import.meta.resolve('@hono/zod-openapi'));
  const manifest = JSON.parse(await readFile(join(dirname(entry), '../package.json'), 'utf8')) as { version: string };
  const target = `${dist}http/zod-openapi.js`;
  if (!(await readFile(target, 'utf8')).includes("from '@hono/zod-openapi'")) throw new Error(`${target} is not the re-export of @hono/zod-openapi that tsc writes`);
  await writeFile(target, vendoredZodOpenApi(await readFile(entry, 'utf8'), manifest.version));
  await rm(`${target}.map`, { force: true });
}
