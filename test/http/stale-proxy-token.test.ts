/**
 * An app whose NEON_FETCH_ENDPOINT carries a proxy token `skiplock dev` no longer serves (an earlier
 * run's, pasted into .dev.vars / .env.local): skiplock's API and dashboard answer 503 naming
 * `npx skiplock dev` and the file to re-copy, not a bare 500 — through the real Neon HTTP driver
 * and the real local proxy, and without showing a token.
 */
import { afterAll, beforeAll, expect, test } from 'vitest';
import { startNeonProxy, type NeonProxy } from '../../src/dev/neon-proxy.ts';
import { createApp } from '../../src/http/app.ts';
import { createSkiplock } from '../../src/runtime/skiplock.ts';
import { createNeonHttpDriver } from '../../src/store/drivers/neon-http.ts';
import { exampleTasks } from '../../src/tasks/examples.ts';
import { createTestDb, type TestDb } from '../support/db.ts';
import { getPage, logIn } from './dashboard-support.ts';
import { API_TOKEN, type TestApp } from './helpers.ts';

let db: TestDb;
let proxy: NeonProxy;
let t: TestApp;
const STALE_TOKEN = 'an-earlier-runs-token-0123456789';

beforeAll(async () => {
  db = await createTestDb();
  proxy = await startNeonProxy();
  const stale = proxy.fetchEndpoint.replace(/\/[^/]+\/sql$/, `/${STALE_TOKEN}/sql`);
  const skiplock = createSkiplock({ sql: createNeonHttpDriver(db.url, { fetchEndpoint: stale }), tasks: exampleTasks, log: () => {} });
  const app = createApp({ skiplock, apiToken: API_TOKEN, tick: { untilIdle: true, budgetMs: 5_000 } });
  t = { db, skiplock, app } as unknown as TestApp;
});

afterAll(async () => {
  await proxy?.close();
  await db?.drop();
});

const secretsIn = (text: string) => [STALE_TOKEN, new URL(proxy.fetchEndpoint).pathname.split('/')[1]!, new URL(db.url).password].filter((s) => text.includes(s));

test('the API: 503 not_configured naming `npx skiplock dev` and .dev.vars / .env.local, on reads and writes', async () => {
  for (const [method, path, body] of [['GET', '/v1/jobs', undefined], ['POST', '/v1/jobs', { task: 'echo', payload: { message: 'hi' } }], ['POST', '/v1/tick', undefined]] as const) {
    const response = await t.app.request(new Request(`http://skiplock.test${path}`, {
      method,
      headers: { authorization: `Bearer ${API_TOKEN}`, 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    }));
    const text = await response.text();
    expect(response.status, `${method} ${path}: ${text}`).toBe(503);
    const { error } = JSON.parse(text) as { error: { code: string; message: string } };
    expect(error.code).toBe('not_configured');
    expect(error.message).toContain('npx skiplock dev');
    expect(error.message).toContain('.dev.vars');
    expect(error.message).toContain('.env.local');
    expect(secretsIn(text)).toEqual([]);
  }
});

test('the dashboard: a 503 page with the same advice', async () => {
  const cookie = await logIn(t);
  const response = await getPage(t, '/', cookie);
  const html = await response.text();
  expect(response.status).toBe(503);
  expect(html).toContain('npx skiplock dev');
  expect(html).toContain('.env.local');
  expect(secretsIn(html)).toEqual([]);
});
