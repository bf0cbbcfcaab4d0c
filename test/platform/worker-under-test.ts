/**
 * One Worker in the real Workers runtime for a test file: a fresh test database, the local Neon
 * proxy in front of it, and `wrangler dev` (workerd) with the given vars, as `npm start` runs it.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '../../src/dev/embedded-postgres.ts';
import { startNeonProxy, type NeonProxy } from '../../src/dev/neon-proxy.ts';
import { startWranglerDev, type WranglerDev } from '../../src/dev/wrangler-dev.ts';
import { createTestDb, type TestDb } from '../support/db.ts';

export interface WorkerUnderTest {
  db: TestDb;
  proxy: NeonProxy;
  worker: WranglerDev;
  stop(): Promise<void>;
}

export async function startWorkerUnderTest(vars: Record<string, string>, options: { config?: string } = {}): Promise<WorkerUnderTest> {
  const db = await createTestDb();
  const proxy = await startNeonProxy();
  const stateDir = await mkdtemp(join(tmpdir(), 'skiplock-wrangler-'));
  const worker = await startWranglerDev({
    port: await freePort(),
    persistTo: stateDir,
    stdio: process.env.WRANGLER_STDIO === 'inherit' ? 'inherit' : 'ignore',
    vars: { DATABASE_URL: db.url, NEON_FETCH_ENDPOINT: proxy.fetchEndpoint, ...vars },
    ...(options.config && { config: options.config }),
  });
  return {
    db,
    proxy,
    worker,
    async stop() {
      await worker.stop();
      await proxy.close();
      await db.drop();
      await rm(stateDir, { recursive: true, force: true });
    },
  };
}
