/**
 * The opt-in Durable Object ticker (TICKER = "alarm") in workerd: without any cron invocation,
 * the alarm follows up work an enqueue left behind — here the retries of a `flaky` job, due
 * about a second after each failure.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { freePort } from '../../src/dev/embedded-postgres.ts';
import { startNeonProxy, type NeonProxy } from '../../src/dev/neon-proxy.ts';
import { startWranglerDev, type WranglerDev } from '../../src/dev/wrangler-dev.ts';
import { statement } from '../../src/store/sql.ts';
import { createTestDb, type TestDb } from '../support/db.ts';

const TOKEN = 'alarm-test-token';
let db: TestDb;
let proxy: NeonProxy;
let worker: WranglerDev;
let stateDir: string;

beforeAll(async () => {
  db = await createTestDb();
  proxy = await startNeonProxy();
  stateDir = await mkdtemp(join(tmpdir(), 'skiplock-wrangler-'));
  worker = await startWranglerDev({
    port: await freePort(),
    persistTo: stateDir,
    stdio: 'ignore',
    vars: { DATABASE_URL: db.url, NEON_FETCH_ENDPOINT: proxy.fetchEndpoint, API_TOKEN: TOKEN, TICKER: 'alarm', ALARM_TICK_BUDGET_MS: '12000' },
  });
});

afterAll(async () => {
  await worker?.stop();
  await proxy?.close();
  await db?.drop();
  if (stateDir) await rm(stateDir, { recursive: true, force: true });
});

test('the alarm ticks while there is work: a flaky job retries to DONE with no cron at all', async () => {
  const response = await fetch(`${worker.url}/v1/jobs`, {
    method: 'POST',
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify({ task: 'flaky', payload: { failTimes: 2 } }),
  });
  expect(response.status).toBe(201);
  const { job } = (await response.json()) as { job: { id: string } };

  const deadline = Date.now() + 15_000;
  let row: Record<string, unknown> | undefined;
  while (Date.now() < deadline) {
    [row] = await db.sql.query(statement(`SELECT status, attempts, result FROM skiplock.job WHERE id = $1`, [job.id]));
    if (row?.status === 'DONE') break;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  expect(row).toMatchObject({ status: 'DONE', attempts: 3, result: { attempts: 3 } });
});
