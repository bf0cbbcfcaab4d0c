/**
 * The Vercel function as Vercel builds it: @vercel/node (the builder `vercel.json` names) compiles
 * src/app/vercel.ts and traces what it imports, offline. The built function must load
 * under Node and answer — the source tests (vercel.test.ts) cannot show that the compiled files
 * still import each other (they import `./x.ts`, which a compile must turn into `./x.js`).
 */
import { glob } from '@vercel/build-utils';
import { copyFile, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { PROJECT_ROOT } from '../../src/dev/wrangler-dev.ts';
import { startNeonProxy, type NeonProxy } from '../../src/dev/neon-proxy.ts';
import { createTestDb, type TestDb } from '../support/db.ts';

// The builder's own entry point (its published types only describe request and response).
type BuiltFile = { type: 'FileFsRef'; fsPath: string } | { type: 'FileBlob'; data: string | Buffer } | { type: string };
const { build } = createRequire(import.meta.url)('@vercel/node') as {
  build(options: { files: unknown; entrypoint: string; workPath: string; repoRootPath: string; config: object; meta: object }): Promise<{
    output: { type: string; files: Record<string, BuiltFile> };
  }>;
};

let out: string;
let db: TestDb;
let proxy: NeonProxy;

beforeAll(async () => {
  const files = await glob('**', { cwd: PROJECT_ROOT, ignore: ['node_modules/**', '.git/**', '.skiplock/**', '.wrangler/**', '.vercel/**', 'test/**'] });
  const { output } = await build({ files, entrypoint: 'src/app/vercel.ts', workPath: PROJECT_ROOT, repoRootPath: PROJECT_ROOT, config: {}, meta: { skipDownload: true } });
  if (output.type !== 'Lambda') throw new Error(`expected a Lambda, got ${output.type}`);
  out = await mkdtemp(join(tmpdir(), 'skiplock-vercel-'));
  for (const [name, file] of Object.entries(output.files)) {
    const to = join(out, name);
    await mkdir(dirname(to), { recursive: true });
    if ('fsPath' in file) await copyFile(file.fsPath, to);
    else if ('data' in file) await writeFile(to, file.data);
    else throw new Error(`${name}: a ${file.type} this test does not write out`);
  }
  db = await createTestDb();
  proxy = await startNeonProxy();
}, 120_000);

afterAll(async () => {
  await proxy?.close();
  await db?.drop();
  if (out) await rm(out, { recursive: true, force: true });
});

test('the built function loads and serves: a cron request with the secret runs a tick', async () => {
  Object.assign(process.env, {
    DATABASE_URL: db.url,
    NEON_FETCH_ENDPOINT: proxy.fetchEndpoint,
    API_TOKEN: 'vercel-build-api-token-0123456789',
    CRON_SECRET: 'vercel-build-cron-secret-0123456789',
    TICK_BUDGET_MS: '2000',
    TICK_POLL_INTERVAL_MS: '100',
  });
  const built = (await import(pathToFileURL(join(out, 'src/app/vercel.js')).href)) as {
    default: { fetch(request: Request): Promise<Response> };
    config: { maxDuration: number };
  };
  expect(built.config.maxDuration).toBeGreaterThan(10);
  expect((await built.default.fetch(new Request('https://skiplock.vercel.app/healthz'))).status).toBe(200);
  const refused = await built.default.fetch(new Request('https://skiplock.vercel.app/v1/tick'));
  expect(refused.status).toBe(401);
  const ticked = await built.default.fetch(
    new Request('https://skiplock.vercel.app/v1/tick', { headers: { authorization: 'Bearer vercel-build-cron-secret-0123456789' } }),
  );
  expect(ticked.status).toBe(200);
  expect(await ticked.json()).toMatchObject({ claimed: 0 });
}, 60_000);
