/**
 * The Vercel cron's request with the wake state in the Runtime Cache (src/platform/vercel/cron.ts,
 * wake-store.ts), through the handler's exported `fetch`, on a real database reached with the Neon
 * HTTP driver: a cron with nothing due makes no statement and answers at once; one that knows a
 * job is due later in its minute waits for it instead of polling; a backlog fans out to
 * maxParallelTicks invocations of the tick route.
 */
import { afterAll, beforeAll, beforeEach, expect, test } from 'vitest';
import { z } from 'zod';
import { startNeonProxy, type NeonProxy } from '../../src/dev/neon-proxy.ts';
import { FAN_OUT_HEADER } from '../../src/platform/vercel/cron.ts';
import { createVercelHandler, type VercelHandler } from '../../src/platform/vercel/index.ts';
import { defineTask } from '../../src/runtime/tasks/task.ts';
import { createNeonHttpDriver } from '../../src/store/drivers/neon-http.ts';
import { statement } from '../../src/store/sql.ts';
import { createTestDb, type TestDb } from '../support/db.ts';
import { installVercelContext } from '../support/vercel-context.ts';

const CRON_SECRET = 'vercel-cron-secret-0123456789';
const ORIGIN = 'https://skiplock-cron.vercel.app';

const quick = defineTask({ name: 'quick', payload: z.object({}), timeoutMs: 500, handler: () => ({ ok: true }) });
const slow = defineTask({
  name: 'slow',
  payload: z.object({}),
  timeoutMs: 1_000,
  handler: (_payload, { signal }) => new Promise((resolve) => setTimeout(resolve, 200, { ok: !signal.aborted })),
});

let db: TestDb;
let proxy: NeonProxy;
let handler: VercelHandler;
let statements = 0;
const context = installVercelContext();
const { kept, cache } = context;
const fannedOut: Request[] = [];
const realFetch = globalThis.fetch;

beforeAll(async () => {
  db = await createTestDb();
  proxy = await startNeonProxy();
  // The tick route's own URL reaches this handler (fan-out), like Vercel's routing would.
  globalThis.fetch = (async (input: string | URL | Request, init?: RequestInit) => {
    const request = new Request(input, init);
    if (!request.url.startsWith(ORIGIN)) return realFetch(input, init);
    fannedOut.push(request);
    return handler.fetch(request);
  }) as typeof fetch;
  handler = createVercelHandler({
    tasks: [quick, slow],
    sql: (env) => {
      const sql = createNeonHttpDriver(env.DATABASE_URL!, { fetchEndpoint: env.NEON_FETCH_ENDPOINT! });
      return { ...sql, query: (s) => ((statements += 1), sql.query(s)), batch: (s) => ((statements += 1), sql.batch(s)) };
    },
    env: { DATABASE_URL: db.url, NEON_FETCH_ENDPOINT: proxy.fetchEndpoint, API_TOKEN: 'api-token-0123456789', CRON_SECRET, TICK_BUDGET_MS: '6000', TICK_CONCURRENCY: '2', MAX_PARALLEL_TICKS: '3' },
  });
});

afterAll(async () => {
  globalThis.fetch = realFetch;
  context.remove();
  await proxy?.close();
  await db?.drop();
});

beforeEach(() => {
  fannedOut.length = 0;
});

const cron = async () => {
  const started = performance.now();
  const response = await handler.fetch(new Request(`${ORIGIN}/v1/tick`, { headers: { authorization: `Bearer ${CRON_SECRET}` } }));
  expect(response.status).toBe(200);
  return { body: (await response.json()) as { ticked: boolean; reason: string; done: number; fannedOut: number }, ms: performance.now() - started };
};

async function counts(): Promise<Record<string, number>> {
  const rows = await db.sql.query<{ status: string; n: number }>(statement(`SELECT status, count(*)::int AS n FROM skiplock.job GROUP BY status`));
  return Object.fromEntries(rows.map((r) => [r.status, r.n]));
}

test('the first cron checks the database once; the next, with nothing due, makes no statement', async () => {
  const first = await cron();
  expect(first.body).toMatchObject({ ticked: true, reason: 'unknown' });
  expect(cache.size).toBe(1); // written back
  statements = 0;
  const second = await cron();
  expect(second.body).toMatchObject({ ticked: false, reason: 'not-due' });
  expect(statements).toBe(0);
  expect(second.ms).toBeLessThan(500);
});

test('a job due seconds later, with no timer: the cron waits inside its minute for its instant (nothing else would start it before the next cron)', async () => {
  await db.emptyJobs();
  const { job } = await handler.skiplock().enqueueWithResult({ task: 'quick', payload: {}, delayMs: 2_000 });
  statements = 0;
  const { body } = await cron();
  expect(body).toMatchObject({ ticked: true, done: 1 });
  expect(statements).toBeLessThan(12); // a tick and its conclusion, not a poll each second
  const [row] = await db.sql.query<{ status: string }>(statement(`SELECT status FROM skiplock.job WHERE id = $1`, [job.id]));
  expect(row!.status).toBe('DONE');
});

test('a job due within a second: the cron waits for its instant and runs it, without polling', async () => {
  await db.emptyJobs();
  const { job } = await handler.skiplock().enqueueWithResult({ task: 'quick', payload: {}, delayMs: 600 });
  statements = 0;
  const { body } = await cron();
  // 'forced' when a first round ended with the job due after its last claim (a loaded machine):
  // the cron's loop ticks again inside its window. Either way one job, waited for, few statements.
  expect(body).toMatchObject({ ticked: true, reason: expect.stringMatching(/^(due|forced)$/), done: 1 });
  expect(statements).toBeLessThan(12); // a tick and its conclusion, not a poll each second
  const [row] = await db.sql.query<{ status: string }>(statement(`SELECT status FROM skiplock.job WHERE id = $1`, [job.id]));
  expect(row!.status).toBe('DONE');
});

test('a backlog fans out to maxParallelTicks invocations, which do not fan out again', async () => {
  await db.emptyJobs();
  // Written behind the deployment's back, then the state forgotten (evicted): the cron finds them.
  await db.sql.query(statement(`INSERT INTO skiplock.job (task, payload, timeout_ms) SELECT 'slow', '{}', 1000 FROM generate_series(1, 30)`));
  cache.clear();
  const { body, ms } = await cron();
  expect(body.fannedOut).toBe(2);
  expect(fannedOut.filter((r) => r.headers.has(FAN_OUT_HEADER))).toHaveLength(2);
  expect(await counts()).toEqual({ DONE: 30 });
  // 30 × 200 ms on 2 slots is 3 s alone; on 3 invocations about 1 s.
  expect(ms).toBeLessThan(2_800);
});

test('a source held for wrong tokens (the last X-Forwarded-For hop) gets 429 on the cron route too, even with CRON_SECRET: it cannot tell a right secret from a wrong one there', async () => {
  const tick = (secret: string, from: string) => handler.fetch(new Request(`${ORIGIN}/v1/tick`, { headers: { authorization: `Bearer ${secret}`, 'x-forwarded-for': from } }));
  for (let i = 0; i < 6; i++) expect((await tick('wrong-secret-0123456789', '203.0.113.9')).status).toBe(401);
  const before = statements;
  const held = await tick(CRON_SECRET, '203.0.113.9');
  expect(held.status).toBe(429);
  expect(held.headers.get('retry-after')).toMatch(/^\d+$/);
  expect(statements).toBe(before);
  expect((await tick(CRON_SECRET, '198.51.100.7')).status).toBe(200);
});
