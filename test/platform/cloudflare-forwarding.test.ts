/**
 * In alarm mode every tick the Worker runs concludes into the Durable Object's wake state, not
 * only the isolate's memory (issue 31, item 2, Cloudflare part): a fan-out invocation's retries, an
 * explicit tick's (one that concludes into the driver's store, WakeDriver.store), and the
 * background tick of an enqueue, which also lowers the object to a backstop before it claims and
 * raises it away when it concludes. Without workerd: createWorker in Node with the Neon HTTP driver
 * over the local proxy, and the real SkiplockTicker class on an in-memory storage standing in for
 * the Durable Object (its alarm read back from that storage).
 */
import { afterAll, beforeAll, expect, test } from 'vitest';
import { createWorker } from '../../src/cloudflare.ts';
import { startNeonProxy, type NeonProxy } from '../../src/dev/neon-proxy.ts';
import { BACKSTOP_SLACK_MS, createTickerForwardingStore, type Env } from '../../src/platform/cloudflare/deployment.ts';
import { createMemoryWakeStore } from '../../src/runtime/wake/state.ts';
import { FAN_OUT_HEADER } from '../../src/platform/cloudflare/fan-out.ts';
import type { DurableObjectState } from '../../src/platform/cloudflare/runtime-types.ts';
import { loadWaitUntil, rememberContext } from '../../src/platform/cloudflare/wait-until.ts';
import { createSkiplock } from '../../src/runtime/skiplock.ts';
import { createNeonHttpDriver } from '../../src/store/drivers/neon-http.ts';
import { exampleTasks } from '../../src/tasks/examples.ts';
import { createTestDb, type TestDb } from '../support/db.ts';

const TOKEN = 'forwarding-test-token-0123456789';
let proxy: NeonProxy;
const dbs: TestDb[] = [];
beforeAll(async () => {
  proxy = await startNeonProxy();
  await loadWaitUntil(); // settled first, so that each background tick reaches the test's ctx at once
});
afterAll(async () => {
  await proxy?.close();
  for (const db of dbs) await db.drop();
});

/** A Worker in alarm mode whose Durable Object is the real class over memory; its requests recorded. */
async function alarmWorker(vars: Record<string, string> = {}) {
  const db = await createTestDb();
  dbs.push(db);
  const worker = createWorker({ tasks: exampleTasks, sql: () => createNeonHttpDriver(db.url, { fetchEndpoint: proxy.fetchEndpoint }), log: () => {} });
  const data = new Map<string, unknown>();
  let alarm: number | null = null;
  const storage = {
    get: async (key: string) => data.get(key),
    put: async (key: string, value: unknown) => void data.set(key, structuredClone(value)),
    getAlarm: async () => alarm,
    setAlarm: async (at: number | Date) => void (alarm = Number(at)),
    deleteAlarm: async () => void (alarm = null),
  };
  const requests: { path: string; body: Record<string, unknown>; at: number }[] = [];
  let object: InstanceType<typeof worker.Ticker>;
  const namespace = {
    idFromName: () => 'skiplock',
    get: () => ({
      fetch: async (url: string, init?: RequestInit) => {
        requests.push({ path: new URL(url).pathname, body: JSON.parse(String(init?.body ?? '{}')), at: Date.now() });
        return object.fetch(new Request(url, init));
      },
    }),
  };
  const env = { DATABASE_URL: db.url, API_TOKEN: TOKEN, SKIPLOCK_TICKER: namespace, ...vars } as unknown as Env;
  object = new worker.Ticker({ storage } as unknown as DurableObjectState, env);
  const waited: Promise<unknown>[] = [];
  const ctx = { waitUntil: (p: Promise<unknown>) => void waited.push(p), passThroughOnException() {}, props: {} };
  rememberContext(ctx);
  const settle = async () => {
    for (let seen = 0; seen < waited.length; seen = waited.length) await Promise.all(waited.slice(seen));
  };
  /** A flaky job written by another instance (no wake of this deployment): its retry is due ~1 s after its failure. */
  const flakyElsewhere = () => createSkiplock({ sql: db.sql, tasks: exampleTasks, log: () => {} }).enqueue({ task: 'flaky', payload: { failTimes: 1 } });
  return { worker, env, ctx, requests, settle, flakyElsewhere, alarm: () => alarm, state: () => data.get('wake') as { dueAt: number | null } | undefined };
}

test("a fan-out invocation's conclusion reaches the Durable Object: the retry it made is the object's alarm", async () => {
  const { worker, env, ctx, requests, settle, alarm, flakyElsewhere } = await alarmWorker();
  await flakyElsewhere();
  const request = new Request('https://skiplock/v1/tick', { method: 'POST', headers: { authorization: `Bearer ${TOKEN}`, [FAN_OUT_HEADER]: String(Date.now() + 20_000) } });
  expect((await worker.fetch(request, env, ctx)).status).toBe(202);
  await settle();
  const told = requests.filter((r) => r.path === '/conclude');
  expect(told, JSON.stringify(requests)).toHaveLength(1);
  const dueAt = told[0]!.body.dueAt as number;
  expect(dueAt).toBeGreaterThan(told[0]!.at - 100);
  expect(dueAt).toBeLessThan(told[0]!.at + 5_000);
  expect(alarm()).toBe(dueAt);
});

test("a tick concluding into the driver's store (an explicit tick) reaches the Durable Object", async () => {
  const { worker, env, requests, alarm, flakyElsewhere } = await alarmWorker();
  await flakyElsewhere();
  const { result } = await worker.skiplock(env).tickIfDue({ force: true, untilIdle: true, budgetMs: 20_000 });
  expect(result.retried, JSON.stringify(result)).toBe(1);
  const told = requests.filter((r) => r.path === '/conclude');
  expect(told, JSON.stringify(requests)).toHaveLength(1);
  expect(alarm()).toBe(told[0]!.body.dueAt);
});

test('an enqueue: the object is lowered to a backstop before its background tick claims, raised away when the tick concludes', async () => {
  const { worker, env, requests, settle, alarm, state } = await alarmWorker();
  const before = Date.now();
  const job = await worker.skiplock(env).enqueue({ task: 'echo', payload: { message: 'hi' } });
  await settle();
  expect(requests.map((r) => r.path)).toEqual(['/lower', '/conclude']);
  const backstop = requests[0]!.body.at as number;
  expect(backstop).toBeGreaterThanOrEqual(before + 25_000 + BACKSTOP_SLACK_MS);
  expect(backstop).toBeLessThanOrEqual(Date.now() + 25_000 + BACKSTOP_SLACK_MS);
  // The job ran; nothing is due but retention's pass over it in 7 days: the object's state says so, its alarm is the safety check's.
  expect((await worker.skiplock(env).getJob(job.id))?.status).toBe('DONE');
  expect(state()?.dueAt).toBeGreaterThan(Date.now() + 6 * 86_400_000);
  expect(alarm()).toBeGreaterThan(Date.now() + 3_000_000);
});

test('a later instant is told though a backstop stands (a conclusion may raise the backstop away); a later one than a told instant is not', async () => {
  const { env, requests, alarm } = await alarmWorker();
  const store = createTickerForwardingStore(env, createMemoryWakeStore());
  const now = Date.now();
  const run = await store.backstop(now + 30_000);
  await store.tell(now + 60_000); // a delayed enqueue while the background tick runs
  await store.tell(now + 70_000); // coalesced: the object wakes by +60 s and asks the database then
  expect(requests.map((r) => [r.path, (r.body.at as number) - now])).toEqual([['/lower', 30_000], ['/lower', 60_000]]);
  // The tick concludes with nothing due (its question ran before the delayed write): the object
  // moved since the backstop's answer, so the conclusion only lowers; the +60 s instant holds.
  await run.write({ dueAt: null, checkedAt: Date.now() }, -1);
  expect(requests.at(-1)!.path).toBe('/conclude');
  expect(alarm()).toBe(now + 30_000);
});

test('a task whose timeout only the alarm can give: an enqueue lowers the object to now, so its alarm claims at once', async () => {
  // HTTP_TICK_BUDGET_MS 10 s: the example `sleep` task's 20 s timeout fits only the alarm's 25 s.
  const { worker, env, requests, settle } = await alarmWorker({ HTTP_TICK_BUDGET_MS: '10000' });
  const before = Date.now();
  await worker.skiplock(env).enqueue({ task: 'sleep', payload: { ms: 0 } });
  await settle();
  expect(requests[0]!.path).toBe('/lower');
  expect(requests[0]!.body.at as number).toBeLessThanOrEqual(Date.now());
  expect(requests[0]!.body.at as number).toBeGreaterThanOrEqual(before);
});
