/**
 * `npm run build` (and `prepack`): the migrations as data, then src/ → dist/ with tsc
 * (tsconfig.build.json), @hono/zod-openapi's module written in as dist/http/zod-openapi.js
 * (vendor-zod-openapi.ts), and the CLI made executable. dist/ is rebuilt from scratch.
 */
import { execFileSync } from 'node:child_process';
import { chmod, readFile, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { vendorZodOpenApi } from './vendor-zod-openapi.ts';
import { MIGRATIONS_DATA_FILE, migrationsDataSource, SCHEMA_VERSION_FILE, schemaVersionSource } from './migrations-data.ts';

const root = fileURLToPath(new URL('../../', import.meta.url));
const dist = fileURLToPath(new URL('../../dist/', import.meta.url));

for (const [file, source] of [[MIGRATIONS_DATA_FILE, await migrationsDataSource()], [SCHEMA_VERSION_FILE, await schemaVersionSource()]] as const) {
  if ((await readFile(file, 'utf8').catch(() => '')) !== source) {
    await writeFile(file, source);
    console.log(`[build] regenerated ${file} (commit it)`);
  }
}
await rm(dist, { recursive: true, force: true });
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
execFileSync(process.execPath, [tsc, '-p', 'tsconfig.build.json'], { cwd: root, stdio: 'inherit' });
await vendorZodOpenApi(dist);
const cli = `${dist}cli.js`;
if (!(await readFile(cli, 'utf8')).startsWith('#!/usr/bin/env node\n')) throw new Error('dist/cli.js lacks its #!/usr/bin/env node line');
await chmod(cli, 0o755);
console.log('[build] dist/ written');
