/**
 * Vercel's timer (issue 31 item 3; src/platform/vercel/queue-timer.ts): with the `queue` option,
 * work due later — a delayed job, a retry's backoff, ctx.sleep, an event wait's timeout — starts
 * with NO cron, through a Vercel Queues message at its instant, pushed back to the handler. The
 * real @vercel/queue SDK runs against the local stand-in of the Queue Service
 * (src/dev/queue-service.ts; SKIPLOCK_QUEUE_URL / SKIPLOCK_QUEUE_TOKEN), as the local Neon proxy
 * stands in for Neon; the handler serves HTTP on a real port, as a Vercel Function would.
 * Timings are printed, never asserted (test/platform/measure-vercel-queue.ts measures them).
 */
import type { AddressInfo } from 'node:net';
import { serve, type ServerType } from '@hono/node-server';
import * as vercelQueue from '@vercel/queue';
import { afterAll, beforeAll, expect, test, vi } from 'vitest';
import { z } from 'zod';
import { startNeonProxy, type NeonProxy } from '../../src/dev/neon-proxy.ts';
import { startQueueService, type QueueService } from '../../src/dev/queue-service.ts';
import { createVercelHandler, NO_QUEUE_NOTICE, type VercelEnv, type VercelHandler, type VercelOptions } from '../../src/platform/vercel/index.ts';
import { defineTask } from '../../src/runtime/tasks/task.ts';
import { statement } from '../../src/store/sql.ts';
import { createTestDb, type TestDb } from '../support/db.ts';
import { installVercelContext } from '../support/vercel-context.ts';

const API_TOKEN = 'queue-api-token-0123456789';

let failedOnce = false;
const quick = defineTask({ name: 'quick', payload: z.object({}), timeoutMs: 1_000, handler: () => ({ ok: true }) });
const flaky = defineTask({
  name: 'flaky',
  payload: z.object({}),
  timeoutMs: 1_000,
  maxAttempts: 2,
  backoff: () => 2_500,
  handler: () => {
    if (!failedOnce) {
      failedOnce = true;
      throw new Error('the first attempt fails');
    }
    return { ok: true };
  },
});
const napper = defineTask({
  name: 'napper',
  payload: z.object({ ms: z.number() }),
  timeoutMs: 1_000,
  handler: async (p, ctx) => {
    await ctx.sleep('nap', p.ms);
    return { woke: true };
  },
});
const waiter = defineTask({
  name: 'waiter',
  payload: z.object({ ms: z.number() }),
  timeoutMs: 1_000,
  handler: async (p, ctx) => ({ got: await ctx.waitForEvent('never', { event: 'never.sent', timeoutMs: p.ms }) }),
});
const tasks = [quick, flaky, napper, waiter];

let db: TestDb;
let proxy: NeonProxy;
let queue: QueueService;
let server: ServerType;
let env: VercelEnv;
const handlers = new Map<string, VercelHandler>();
const context = installVercelContext();
const { kept, cache } = context;

const make = (name: string, options: Partial<VercelOptions> = {}, extraEnv: VercelEnv = {}) => {
  const handler = createVercelHandler({ tasks, maxDuration: 15, env: { ...env, ...extraEnv }, queue: { sdk: vercelQueue }, ...options } as VercelOptions);
  handlers.set(name, handler);
  return handler;
};

beforeAll(async () => {
  db = await createTestDb();
  proxy = await startNeonProxy();
  // One port for every handler: /<name>/… reaches handler <name>, as Vercel routes a push to its function.
  server = serve({
    fetch: (request: Request) => {
      const url = new URL(request.url);
      const [, name, ...rest] = url.pathname.split('/');
      const handler = handlers.get(name!);
      if (!handler) return new Response('no such handler', { status: 404 });
      return handler.fetch(new Request(new URL(`/${rest.join('/')}${url.search}`, url), request));
    },
    port: 0,
    hostname: '127.0.0.1',
    overrideGlobalObjects: false,
  });
  await new Promise((resolve) => server.once('listening', resolve));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  queue = await startQueueService({
    consumers: { 'skiplock-wake': `${base}/main/v1/tick`, 'skiplock-hops': `${base}/hops/v1/tick` },
    visibilityTimeoutSeconds: 5,
  });
  // No CRON_SECRET, no cron: nothing but the queue wakes the deployment for work due later.
  env = { DATABASE_URL: db.url, NEON_FETCH_ENDPOINT: proxy.fetchEndpoint, API_TOKEN, TICK_BUDGET_MS: '8000', SKIPLOCK_QUEUE_URL: queue.url, SKIPLOCK_QUEUE_TOKEN: queue.token };
  make('main');
});

afterAll(async () => {
  await Promise.allSettled(kept);
  await queue?.close();
  server?.close();
  context.remove();
  await proxy?.close();
  await db?.drop();
});

/** The job once DONE (or as it is after 20 s): no tick is asked for. */
async function done(id: string, timeoutMs = 20_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const [r] = await db.sql.query(statement(`SELECT status, attempts, run_at, started_at, created_at FROM skiplock.job WHERE id = $1`, [id]));
    if (r!.status === 'DONE' || Date.now() > deadline) return r!;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
async function until(condition: () => boolean, timeoutMs = 10_000) {
  const deadline = Date.now() + timeoutMs;
  while (!condition() && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
}
const late = (r: Record<string, unknown>) => (r.started_at as Date).getTime() - (r.run_at as Date).getTime();

test('a delayed job starts with no cron: one message at its instant, pushed to the handler', async () => {
  const sends = queue.stats().sends;
  const job = await handlers.get('main')!.skiplock().enqueue({ task: 'quick', payload: {}, delayMs: 3_000 });
  const r = await done(job.id);
  expect(r.status).toBe('DONE');
  expect(late(r)).toBeGreaterThanOrEqual(0);
  console.log(`[vercel queue] delayed 3 s: started ${late(r)} ms after runAt`);
  expect(queue.stats().sends).toBeGreaterThan(sends);
  // Acknowledged once the push's tick has concluded (after the job).
  await until(() => queue.messages().some((m) => m.topic === 'skiplock-wake' && m.delaySeconds === 3 && m.acknowledged));
  expect(queue.messages().filter((m) => m.topic === 'skiplock-wake' && m.delaySeconds === 3).map((m) => m.deliveries)).toEqual([1]);
});

test("a retry's backoff starts with no cron", async () => {
  const job = await handlers.get('main')!.skiplock().enqueue({ task: 'flaky', payload: {} });
  const r = await done(job.id);
  expect(r).toMatchObject({ status: 'DONE', attempts: 2 });
  console.log(`[vercel queue] retry after a 2.5 s backoff: started ${late(r)} ms after its runAt`);
});

test('ctx.sleep resumes with no cron', async () => {
  const job = await handlers.get('main')!.skiplock().enqueue({ task: 'napper', payload: { ms: 2_500 } });
  const r = await done(job.id);
  expect(r.status).toBe('DONE');
  console.log(`[vercel queue] 2.5 s sleep: resumed ${late(r)} ms after due`);
});

test("an event wait's timeout resumes with no cron", async () => {
  const job = await handlers.get('main')!.skiplock().enqueue({ task: 'waiter', payload: { ms: 2_500 } });
  const r = await done(job.id);
  expect(r.status).toBe('DONE');
  expect((await handlers.get('main')!.skiplock().getJob(job.id))?.result).toEqual({ got: null });
  console.log(`[vercel queue] 2.5 s event timeout: resumed ${late(r)} ms after due`);
});

test('one instant armed twice (another instance, a retried send) is one message', async () => {
  const other = make('other');
  const at = Date.now() + 30_000;
  const before = queue.stats();
  await handlers.get('main')!.skiplock().wake(new Date(at));
  await other.skiplock().wake(new Date(at));
  await Promise.allSettled(kept);
  const key = `-${Math.ceil(at / 1000)}-0`;
  const after = queue.stats();
  expect(queue.messages().filter((m) => m.idempotencyKey?.endsWith(key))).toHaveLength(1);
  expect(after.sends - before.sends).toBe(2);
  expect(after.duplicates - before.duplicates).toBe(1);
  // The same instance does not send it again at all.
  await handlers.get('main')!.skiplock().wake(new Date(at));
  await Promise.allSettled(kept);
  expect(queue.stats().sends).toBe(after.sends);
});

test('an instant beyond the longest delay is reached in hops, each re-arming it on arrival', async () => {
  const hops = make('hops', { queue: { sdk: vercelQueue, topic: 'skiplock-hops', maxDelaySeconds: 2 } });
  const job = await hops.skiplock().enqueue({ task: 'quick', payload: {}, delayMs: 5_000 });
  const r = await done(job.id);
  expect(r.status).toBe('DONE');
  const runAt = (r.run_at as Date).getTime();
  const keys = queue.messages().filter((m) => m.topic === 'skiplock-hops').map((m) => m.idempotencyKey!);
  // T − 4 s (2 hops left), T − 2 s (1), then T (0) unless the push of T − 2 s, arriving within
  // its 2 s early window, waited for T itself: each hop a message of its own, at most 2 s away.
  const hopsOfT = keys.filter((k) => k.includes(`-${Math.ceil(runAt / 1000)}-`)).map((k) => k.split('-').at(-1));
  expect(hopsOfT.slice(0, 2)).toEqual(['2', '1']);
  expect(queue.messages().filter((m) => m.topic === 'skiplock-hops').every((m) => m.delaySeconds <= 2)).toBe(true);
  console.log(`[vercel queue] 5 s in 2 s hops: started ${late(r)} ms after runAt`);
});

test('a push whose payload is not signed by the deployment does not lower the wake state', async () => {
  const response = await fetch(`${queue.url}/api/v3/topic/skiplock-wake`, {
    method: 'POST',
    headers: { authorization: `Bearer ${queue.token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ at: 0, sig: 'forged' }),
  });
  expect(response.status).toBe(201);
  const { messageId } = (await response.json()) as { messageId: string };
  await until(() => queue.messages().find((m) => m.id === messageId)?.acknowledged === true);
  // Answered and acknowledged (no redelivery), and the state was not lowered to 0.
  expect(queue.messages().find((m) => m.id === messageId)?.acknowledged).toBe(true);
  const states = [...cache.values()] as { dueAt: number | null }[];
  expect(states.every((s) => s.dueAt !== 0)).toBe(true);
});

test('bad configuration is a clear error at start-up', async () => {
  const request = () => new Request('http://x/v1/jobs');
  await expect(createVercelHandler({ tasks, env, queue: { sdk: vercelQueue, topic: 'not a topic' } }).fetch(request())).rejects.toThrow(/queue: the topic must match \[A-Za-z0-9_-\]\+/);
  await expect(createVercelHandler({ tasks, env, queue: { sdk: {} as never } }).fetch(request())).rejects.toThrow(/`sdk` must be the @vercel\/queue module/);
  await expect(createVercelHandler({ tasks, env: { ...env, SKIPLOCK_QUEUE_URL: 'not a url' }, queue: { sdk: vercelQueue } }).fetch(request())).rejects.toThrow(/SKIPLOCK_QUEUE_URL must be an http\(s\) URL/);
  await expect(createVercelHandler({ tasks, env, queue: { sdk: vercelQueue, maxDelaySeconds: 90_000 } }).fetch(request())).rejects.toThrow(/maxDelaySeconds must be an integer from 1 to 86400/);
  await expect(createVercelHandler({ tasks, env }).fetch(request())).rejects.toThrow(/SKIPLOCK_QUEUE_URL, SKIPLOCK_QUEUE_TOKEN are set, but the handler has no `queue` option/);
});

test('without a queue, the first request says in one line what starts work due later instead', async () => {
  const info = vi.spyOn(console, 'info').mockImplementation(() => {});
  try {
    const plain = createVercelHandler({ tasks, env: { DATABASE_URL: db.url, NEON_FETCH_ENDPOINT: proxy.fetchEndpoint, API_TOKEN } });
    await plain.fetch(new Request('http://x/v1/health'));
    await plain.fetch(new Request('http://x/v1/health'));
    expect(info.mock.calls.filter(([line]) => line === NO_QUEUE_NOTICE)).toHaveLength(1);
    expect(NO_QUEUE_NOTICE).toMatch(/within a minute with `\* \* \* \* \*` \(Pro\), up to a day on Hobby/);
  } finally {
    info.mockRestore();
  }
});

test('with the timer, a cron invocation does not wait for a job seconds away: it answers at once and the message starts the job', async () => {
  const CRON_SECRET = 'queue-cron-secret-0123456789';
  const withCron = make('cron', {}, { CRON_SECRET });
  const job = await withCron.skiplock().enqueue({ task: 'quick', payload: {}, delayMs: 3_000 });
  const response = await withCron.fetch(new Request('http://127.0.0.1/v1/tick', { headers: { authorization: `Bearer ${CRON_SECRET}` } }));
  const body = (await response.json()) as { done: number; nextAt: string | null };
  expect(body.done).toBe(0);
  const [row] = await db.sql.query<{ status: string; run_at: Date }>(statement(`SELECT status, run_at FROM skiplock.job WHERE id = $1`, [job.id]));
  expect(row!.status).toBe('QUEUED');
  expect(Date.now()).toBeLessThan(new Date(row!.run_at).getTime()); // it answered before the instant
  expect((await done(job.id)).status).toBe('DONE');
});
