/**
 * `wrangler dev` as `npm start` runs it: the Worker's variables (API_TOKEN, DATABASE_URL, the
 * proxy's secret endpoint) reach the Worker intact, but no process of wrangler's group (wrangler,
 * its workerd) has them on its command line, which any local user can read (`ps`).
 */
import { mkdtemp, readdir, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { freePort } from '../../src/dev/embedded-postgres.ts';
import { startNeonProxy, type NeonProxy } from '../../src/dev/neon-proxy.ts';
import { startWranglerDev, type WranglerDev } from '../../src/dev/wrangler-dev.ts';
import { createTestDb, type TestDb } from '../support/db.ts';

// Dollars, quotes and a hash: a dotenv file would expand or cut them if written carelessly.
const TOKEN = `tok$HOME-\${PATH}-\\$x-'q"-#not-a-comment`;
let db: TestDb;
let proxy: NeonProxy;
let worker: WranglerDev;
let stateDir: string;
let varsFile: string | undefined;

beforeAll(async () => {
  db = await createTestDb();
  proxy = await startNeonProxy();
  stateDir = await mkdtemp(join(tmpdir(), 'skiplock-wrangler-'));
  worker = await startWranglerDev({
    port: await freePort(),
    persistTo: stateDir,
    stdio: 'ignore',
    vars: { DATABASE_URL: db.url, NEON_FETCH_ENDPOINT: proxy.fetchEndpoint, API_TOKEN: TOKEN, TICK_BUDGET_MS: '5000' },
  });
});

afterAll(async () => {
  await worker?.stop();
  await proxy?.close();
  await db?.drop();
  await rm(stateDir, { recursive: true, force: true });
});

/** The command lines of every process in the process group `pgid`. */
async function commandLines(pgid: number): Promise<string[][]> {
  const lines: string[][] = [];
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const statText = await readFile(`/proc/${entry}/stat`, 'utf8').catch(() => '');
    const fields = statText.slice(statText.lastIndexOf(')') + 2).split(' ');
    if (Number(fields[2]) !== pgid) continue;
    const cmdline = await readFile(`/proc/${entry}/cmdline`, 'utf8').catch(() => '');
    lines.push(cmdline.split('\0'));
  }
  return lines;
}

test('the Worker gets the variables intact: the token with $, quotes and # authenticates', async () => {
  const ok = await fetch(`${worker.url}/v1/jobs`, { headers: { authorization: `Bearer ${TOKEN}` } });
  expect(ok.status).toBe(200);
  await ok.body?.cancel();
  const wrong = await fetch(`${worker.url}/v1/jobs`, { headers: { authorization: 'Bearer tok' } });
  expect(wrong.status).toBe(401);
  await wrong.body?.cancel();
});

test('no process of the group has a secret on its command line; the file holding them is private', async () => {
  const lines = await commandLines(worker.pid);
  expect(lines.length).toBeGreaterThanOrEqual(2); // wrangler and workerd at least
  const argv = lines.flat().join(' ');
  const dbPassword = decodeURIComponent(new URL(db.url).password);
  const proxyToken = new URL(proxy.fetchEndpoint).pathname.split('/')[1]!;
  expect(dbPassword.length).toBeGreaterThan(10);
  for (const secret of [TOKEN, 'tok$HOME', dbPassword, proxyToken, db.url]) expect(argv).not.toContain(secret);

  const wrangler = lines.find((line) => line.includes('--env-file'));
  const file = wrangler?.[wrangler.indexOf('--env-file') + 1];
  expect(file).toBeDefined();
  expect((await stat(file!)).mode & 0o777).toBe(0o600);
  expect((await stat(dirname(file!))).mode & 0o777).toBe(0o700);
  varsFile = file;
});

test('stop() removes the file', async () => {
  expect(varsFile).toBeDefined();
  await worker.stop();
  await expect(stat(dirname(varsFile!))).rejects.toMatchObject({ code: 'ENOENT' });
});
