/**
 * The Vercel function, called as Vercel calls it: its exported `fetch` with a Request. The
 * database is real, reached through the Neon HTTP driver and the local Neon proxy.
 */
import { afterAll, beforeAll, expect, test } from 'vitest';
import { startNeonProxy, type NeonProxy } from '../../src/dev/neon-proxy.ts';
import { statement } from '../../src/store/sql.ts';
import { createTestDb, type TestDb } from '../support/db.ts';

const CRON_SECRET = 'vercel-cron-secret-0123456789';
const API_TOKEN = 'vercel-api-token-0123456789';

let db: TestDb;
let proxy: NeonProxy;
let handler: { fetch(request: Request): Response | Promise<Response> };
let config: { maxDuration: number };

// Jobs here get a 1 s timeout: a tick claims only jobs whose timeout fits its (short) budget.
// What Vercel's runtime puts on globalThis for @vercel/functions' waitUntil.
const kept: Promise<unknown>[] = [];
const REQUEST_CONTEXT = Symbol.for('@vercel/request-context');

beforeAll(async () => {
  db = await createTestDb();
  proxy = await startNeonProxy();
  Object.assign(process.env, {
    DATABASE_URL: db.url,
    NEON_FETCH_ENDPOINT: proxy.fetchEndpoint,
    API_TOKEN,
    CRON_SECRET,
    TICK_BUDGET_MS: '3000', // instead of maxDuration's 55 s, so the cron tick here is short
    TICK_POLL_INTERVAL_MS: '100',
  });
  (globalThis as Record<symbol, unknown>)[REQUEST_CONTEXT] = { get: () => ({ waitUntil: (work: Promise<unknown>) => kept.push(work) }) };
  ({ default: handler, config } = await import('../../src/app/vercel.ts'));
});

afterAll(async () => {
  delete (globalThis as Record<symbol, unknown>)[REQUEST_CONTEXT];
  await proxy?.close();
  await db?.drop();
});

const tick = (authorization?: string) =>
  handler.fetch(new Request('https://skiplock.vercel.app/v1/tick', { headers: authorization ? { authorization } : {} }));

async function queueEcho(): Promise<string> {
  const [row] = await db.sql.query(statement(`INSERT INTO skiplock.job (task, payload, timeout_ms) VALUES ('echo', '{"message":"cron"}', 1000) RETURNING id::text`));
  return String(row!.id);
}

async function status(id: string): Promise<string> {
  const [row] = await db.sql.query(statement(`SELECT status FROM skiplock.job WHERE id = $1`, [id]));
  return String(row!.status);
}

test('the function declares its maxDuration for Vercel', () => {
  expect(config.maxDuration).toBeGreaterThan(10);
});

test('a cron request without the secret is 401 and runs nothing', async () => {
  const id = await queueEcho();
  expect((await tick()).status).toBe(401);
  expect((await tick('Bearer not-the-secret')).status).toBe(401);
  expect(await status(id)).toBe('QUEUED');
});

test('a cron request with Authorization: Bearer $CRON_SECRET runs a tick', async () => {
  const id = await queueEcho();
  const response = await tick(`Bearer ${CRON_SECRET}`);
  expect(response.status).toBe(200);
  const result = (await response.json()) as { claimed: number; done: number };
  expect(result.claimed).toBeGreaterThanOrEqual(1); // also the job the refused requests left queued
  expect(result.done).toBe(result.claimed);
  expect(await status(id)).toBe('DONE');
});

test('an enqueue hands its tick to waitUntil', async () => {
  kept.length = 0;
  const response = await handler.fetch(
    new Request('https://skiplock.vercel.app/v1/jobs', {
      method: 'POST',
      headers: { authorization: `Bearer ${API_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ task: 'echo', payload: { message: 'soon' }, timeoutMs: 1000 }),
    }),
  );
  expect(response.status).toBe(201);
  const { job } = (await response.json()) as { job: { id: string } };
  expect(kept).toHaveLength(1);
  await Promise.all(kept);
  expect(await status(job.id)).toBe('DONE');
});
