/**
 * Issue 30 item 10: failed bearer tokens are slowed down per source (the login throttle's
 * counts, shared with the dashboard's login), answered 429 with Retry-After; the source is what
 * the platform vouches for (CF-Connecting-IP on Cloudflare, the hop Vercel wrote in
 * X-Forwarded-For, the socket on Node), so no one can spend the owner's source, and failures
 * from other sources never hold it. A callback URL's token is checked before its body is read.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { z } from 'zod';
import { createApp, type AppOptions } from '../../src/http/app.ts';
import { startNodeRunner } from '../../src/platform/node/runner.ts';
import { createSkiplock, type Skiplock } from '../../src/runtime/skiplock.ts';
import { defineTask } from '../../src/runtime/tasks/task.ts';
import { statement } from '../../src/store/sql.ts';
import { exampleTasks } from '../../src/tasks/examples.ts';
import { createTestDb, type TestDb } from '../support/db.ts';
import { API_TOKEN, CRON_SECRET } from './helpers.ts';

let db: TestDb;
let skiplock: Skiplock;
const urls: string[] = [];
const approval = defineTask({
  name: 'approval',
  payload: z.object({}),
  timeoutMs: 2_000,
  handler: async (_p, ctx) => {
    urls.push((await ctx.createCallback('approve', { timeoutMs: 600_000 })).url);
    return ctx.waitForCallback('approve');
  },
});
beforeAll(async () => {
  db = await createTestDb();
  skiplock = createSkiplock({
    sql: db.sql,
    tasks: [...exampleTasks, approval],
    log: () => {},
    callbacks: { secret: 'a-callback-secret-of-some-length', publicUrl: 'https://jobs.example.com' },
  });
});
afterAll(() => db?.drop());

const appWith = (options: Partial<AppOptions> = {}) => createApp({ skiplock, apiToken: API_TOKEN, cronSecret: CRON_SECRET, ...options });
const get = (app: ReturnType<typeof createApp>, path: string, token: string | null, headers: Record<string, string> = {}, env?: object) =>
  app.request(`http://skiplock.test${path}`, { headers: { ...headers, ...(token === null ? {} : { authorization: `Bearer ${token}` }) } }, env);

describe('failed bearer tokens, per source', () => {
  test('Cloudflare (CF-Connecting-IP): after 5 failures a source waits (429, Retry-After), even with the right token; the owner elsewhere is not held', async () => {
    const app = appWith({ platform: 'cloudflare' });
    const from = (ip: string) => ({ 'cf-connecting-ip': ip });
    const statuses: number[] = [];
    for (let i = 0; i < 200; i++) statuses.push((await get(app, '/v1/stats', `wrong-token-${i}-0123456789`, from('203.0.113.9'))).status);
    expect(statuses.slice(0, 6)).toEqual([401, 401, 401, 401, 401, 401]);
    expect(new Set(statuses.slice(6))).toEqual(new Set([429]));
    const held = await get(app, '/v1/stats', API_TOKEN, from('203.0.113.9'));
    expect(held.status).toBe(429);
    expect(Number(held.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(await held.json()).toMatchObject({ error: { code: 'too_many_requests' } });
    // The owner, from their own address, is not held.
    expect((await get(app, '/v1/stats', API_TOKEN, from('198.51.100.7'))).status).toBe(200);
  });

  test('failures spread over many sources never hold another source (no shared bucket an attacker can fill)', async () => {
    const app = appWith({ platform: 'cloudflare' });
    for (let i = 0; i < 300; i++) expect((await get(app, '/v1/stats', 'wrong-token-0123456789', { 'cf-connecting-ip': `10.1.${i >> 8}.${i & 255}` })).status).toBe(401);
    expect((await get(app, '/v1/stats', API_TOKEN, { 'cf-connecting-ip': '198.51.100.7' })).status).toBe(200);
  });

  test('an IPv6 source counts by its /64: rotating addresses inside one network does not escape the wait', async () => {
    const app = appWith({ platform: 'cloudflare' });
    for (let i = 0; i < 6; i++) await get(app, '/v1/stats', 'wrong-token-0123456789', { 'cf-connecting-ip': `2001:db8:1:2::${i + 1}` });
    expect((await get(app, '/v1/stats', API_TOKEN, { 'cf-connecting-ip': '2001:db8:1:2:ffff::9' })).status).toBe(429);
    expect((await get(app, '/v1/stats', API_TOKEN, { 'cf-connecting-ip': '2001:db8:1:3::1' })).status).toBe(200);
  });

  test('Vercel: the source is the hop Vercel wrote (the last X-Forwarded-For entry), so entries a client prepends change nothing', async () => {
    const app = appWith({ platform: 'vercel' });
    for (let i = 0; i < 6; i++) await get(app, '/v1/stats', 'wrong-token-0123456789', { 'x-forwarded-for': `10.9.9.${i}, 203.0.113.9` });
    expect((await get(app, '/v1/stats', API_TOKEN, { 'x-forwarded-for': '198.51.100.7, 203.0.113.9' })).status).toBe(429);
    expect((await get(app, '/v1/stats', API_TOKEN, { 'x-forwarded-for': '203.0.113.9, 198.51.100.7' })).status).toBe(200);
  });

  test('Node: the socket address, whatever CF-Connecting-IP or X-Forwarded-For a client sends', async () => {
    const app = appWith({ platform: 'node' });
    const socket = (remoteAddress: string) => ({ incoming: { socket: { remoteAddress } }, outgoing: {} });
    for (let i = 0; i < 6; i++) await get(app, '/v1/stats', 'wrong-token-0123456789', { 'cf-connecting-ip': `10.0.0.${i}`, 'x-forwarded-for': `10.0.1.${i}` }, socket('::ffff:203.0.113.9'));
    expect((await get(app, '/v1/stats', API_TOKEN, {}, socket('203.0.113.9'))).status).toBe(429);
    expect((await get(app, '/v1/stats', API_TOKEN, { 'cf-connecting-ip': '203.0.113.9' }, socket('198.51.100.7'))).status).toBe(200);
  });

  test('the Node runner: a real socket', async () => {
    const runner = await startNodeRunner({ skiplock, apiToken: API_TOKEN, port: 0 });
    try {
      const call = (token: string) => fetch(`${runner.url}/v1/stats`, { headers: { authorization: `Bearer ${token}` } });
      for (let i = 0; i < 6; i++) expect((await call('wrong-token-0123456789')).status).toBe(401);
      const held = await call(API_TOKEN);
      expect(held.status).toBe(429);
      expect(Number(held.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    } finally {
      await runner.stop();
    }
  });

  test('AppOptions.clientAddress decides the source (a proxy of your own)', async () => {
    const app = appWith({ clientAddress: (request) => request.headers.get('x-real-ip') ?? undefined });
    for (let i = 0; i < 6; i++) await get(app, '/v1/stats', 'wrong-token-0123456789', { 'x-real-ip': '203.0.113.9' });
    expect((await get(app, '/v1/stats', API_TOKEN, { 'x-real-ip': '203.0.113.9' })).status).toBe(429);
    expect((await get(app, '/v1/stats', API_TOKEN, { 'x-real-ip': '198.51.100.7' })).status).toBe(200);
  });

  test('every bearer check counts (/metrics, /v1/tick, /healthz?deep=1), and so does the dashboard login: one count per source', async () => {
    const app = appWith({ platform: 'cloudflare' });
    const from = { 'cf-connecting-ip': '203.0.113.9' };
    expect((await get(app, '/metrics', 'wrong-token-0123456789', from)).status).toBe(401);
    expect((await get(app, '/v1/tick', 'wrong-token-0123456789', from)).status).toBe(401);
    expect((await get(app, '/healthz?deep=1', 'wrong-token-0123456789', from)).status).toBe(401);
    const login = (token: string) =>
      app.request('http://skiplock.test/login', { method: 'POST', headers: { ...from, origin: 'http://skiplock.test', 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams({ token, next: '/' }) });
    expect((await login('wrong-token-0123456789')).status).toBe(401);
    expect((await get(app, '/v1/jobs', 'wrong-token-0123456789', from)).status).toBe(401);
    expect((await get(app, '/v1/jobs', 'wrong-token-0123456789', from)).status).toBe(401); // the 6th, checked: the waits begin
    expect((await login(API_TOKEN)).status).toBe(429);
    expect((await get(app, '/healthz?deep=1', API_TOKEN, from)).status).toBe(429);
    // Liveness needs no token and is never held.
    expect((await get(app, '/healthz', null, from)).status).toBe(200);
  });

  test('a request without a token is not a guess: 401 as often as it likes, and the right token then works', async () => {
    const app = appWith({ platform: 'cloudflare' });
    for (let i = 0; i < 20; i++) expect((await get(app, '/v1/stats', null, { 'cf-connecting-ip': '203.0.113.9' })).status).toBe(401);
    expect((await get(app, '/v1/stats', API_TOKEN, { 'cf-connecting-ip': '203.0.113.9' })).status).toBe(200);
  });

  test('a success clears its source: a mistyped token, then the right one, starts over', async () => {
    const app = appWith({ platform: 'cloudflare' });
    const from = { 'cf-connecting-ip': '203.0.113.9' };
    for (let round = 0; round < 3; round++) {
      for (let i = 0; i < 5; i++) expect((await get(app, '/v1/stats', 'wrong-token-0123456789', from)).status).toBe(401);
      expect((await get(app, '/v1/stats', API_TOKEN, from)).status).toBe(200);
    }
  });
});

describe('a callback URL: the token before the body', () => {
  let token: string;
  const app = () => appWith();
  beforeAll(async () => {
    await skiplock.enqueue({ task: 'approval', payload: {} });
    await skiplock.tick({ untilIdle: true, budgetMs: 5_000, pollIntervalMs: 10 });
    token = new URL(urls[0]!).pathname.split('/').pop()!;
  });
  const forged = () => token.slice(0, -2) + (token.endsWith('AA') ? 'BB' : 'AA');
  const post = (path: string, body: string | ReadableStream<Uint8Array>, headers: Record<string, string> = {}) =>
    app().request(`http://skiplock.test${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body, ...({ duplex: 'half' } as object) });

  test('a wrong token with a body that is not JSON: 404 (not 400)', async () => {
    for (const path of [`/v1/callbacks/${forged()}`, '/v1/callbacks/x', '/v1/callbacks/1.2.3']) {
      const res = await post(path, '{not json');
      expect([path, res.status, ((await res.json()) as { error: { code: string } }).error.code]).toEqual([path, 404, 'not_found']);
    }
    // With the right token the same body is what is wrong.
    expect((await post(`/v1/callbacks/${token}`, '{not json')).status).toBe(400);
  });

  test('a wrong token with a 1 MB body: 404 without reading a byte of it', async () => {
    let pulls = 0;
    const chunk = new TextEncoder().encode(`"${'x'.repeat(64 * 1024 - 2)}"`);
    const body = new ReadableStream<Uint8Array>(
      {
        pull(controller) {
          pulls += 1;
          if (pulls > 16) controller.close();
          else controller.enqueue(chunk);
        },
      },
      { highWaterMark: 0 },
    );
    const res = await post(`/v1/callbacks/${forged()}`, body);
    expect(res.status).toBe(404);
    expect(pulls).toBe(0);
  });

  test('a wrong token with a body over the limit: 404, not 413 (nothing about the body is looked at)', async () => {
    const big = `"${'x'.repeat(2 * 1024 * 1024)}"`;
    expect((await post(`/v1/callbacks/${forged()}`, big, { 'content-length': String(big.length) })).status).toBe(404);
    expect((await post(`/v1/callbacks/${token}`, big, { 'content-length': String(big.length) })).status).toBe(413);
    // Nothing was written by any of it: the callback is still open.
    const [row] = await db.sql.query(statement(`SELECT status FROM skiplock.job_step WHERE id = 'approve'`));
    expect(row?.status).toBe('waiting');
  });
});
