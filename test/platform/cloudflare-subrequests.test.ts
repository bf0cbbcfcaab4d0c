/**
 * Workers Free: at most 50 subrequests per invocation (each Neon HTTP statement is one) and 10 ms
 * of CPU. Local workerd enforces neither, so, as cloudflare-connections.test.ts does for the six
 * connections, this test wraps global fetch with a counter that fails the 51st subrequest of an
 * invocation the way Cloudflare does, and runs the Worker (createWorker, default options, the Neon
 * HTTP driver over the local Neon proxy) through its invocations: an idle cron, and a user's route
 * that enqueues a batch that fits (the tick it starts runs in the same invocation).
 */
import { afterAll, beforeAll, expect, test } from 'vitest';
import { startNeonProxy, type NeonProxy } from '../../src/dev/neon-proxy.ts';
import { createWorker } from '../../src/cloudflare.ts';
import type { Env } from '../../src/platform/cloudflare/deployment.ts';
import { rememberContext } from '../../src/platform/cloudflare/wait-until.ts';
import { createNeonHttpDriver } from '../../src/store/drivers/neon-http.ts';
import { statement } from '../../src/store/sql.ts';
import { exampleTasks } from '../../src/tasks/examples.ts';
import { createTestDb, type TestDb } from '../support/db.ts';

const FREE_SUBREQUESTS = 50;

let db: TestDb;
let proxy: NeonProxy;
beforeAll(async () => {
  db = await createTestDb();
  proxy = await startNeonProxy();
});
afterAll(async () => {
  await proxy?.close();
  await db?.drop();
});

/** One invocation under Workers Free's cap: its subrequests counted, the 51st refused as Cloudflare does. */
async function invocation<T>(body: (ctx: { waitUntil(p: Promise<unknown>): void; passThroughOnException(): void; props: object }) => Promise<T>) {
  const original = globalThis.fetch;
  let subrequests = 0;
  globalThis.fetch = async (input: string | URL | Request, init?: RequestInit) => {
    subrequests += 1;
    if (subrequests > FREE_SUBREQUESTS) throw new Error('Too many subrequests.');
    return original(input, init);
  };
  const waited: Promise<unknown>[] = [];
  const ctx = { waitUntil: (p: Promise<unknown>) => void waited.push(p), passThroughOnException() {}, props: {} };
  const cpu = process.cpuUsage();
  try {
    const value = await body(ctx);
    // waitUntil work belongs to the invocation too (it may add more while it runs).
    for (let seen = 0; seen < waited.length; seen = waited.length) await Promise.all(waited.slice(seen));
    const used = process.cpuUsage(cpu);
    return { value, subrequests, cpuMs: (used.user + used.system) / 1000 };
  } finally {
    globalThis.fetch = original;
  }
}

test('with default settings: an idle cron invocation makes no statement; a cron-mode check and a batch that fits stay under 50', async () => {
  const worker = createWorker({ tasks: exampleTasks, sql: () => createNeonHttpDriver(db.url, { fetchEndpoint: proxy.fetchEndpoint }), log: () => {} });
  // TICKER = "cron" (no Durable Object in Node): the isolate's memory is the wake state.
  const env = { DATABASE_URL: db.url, API_TOKEN: 't', TICKER: 'cron' } as Env;
  const controller = { scheduledTime: Date.now(), cron: '* * * * *' };

  // Cron mode: each minute's invocation checks the database once (its isolate's memory is not shared).
  const cold = await invocation((ctx) => worker.scheduled(controller, env, ctx));
  console.log(`cron-mode invocation (its one database check): ${cold.subrequests} subrequests, ${cold.cpuMs.toFixed(1)} ms CPU`);
  expect(cold.subrequests).toBeLessThanOrEqual(10);

  // The default, the Durable Object ticker: the cron only asks the object to check its alarm (one
  // subrequest, no statement). A stand-in namespace answers as the object does when nothing is due.
  let tickerCalls = 0;
  const ticker = { idFromName: () => 'id', get: () => ({ fetch: async () => ((tickerCalls += 1), new Response(null, { status: 204 })) }) };
  const doEnv = { DATABASE_URL: db.url, API_TOKEN: 't', SKIPLOCK_TICKER: ticker } as unknown as Env;
  // CPU is this whole process's (the proxy, vitest): the median of 21 idle invocations, on a loaded machine.
  const idle = [];
  for (let i = 0; i < 21; i += 1) {
    const statementsBefore = proxy.sqlRequests();
    idle.push(await invocation((ctx) => worker.scheduled(controller, doEnv, ctx)));
    expect(proxy.sqlRequests()).toBe(statementsBefore);
  }
  const medianCpu = idle.map((r) => r.cpuMs).sort((a, b) => a - b)[10]!;
  console.log(`idle cron invocation (Durable Object ticker): ${tickerCalls / idle.length} subrequest (to the object), no statement, median ${medianCpu.toFixed(2)} ms CPU (process-wide)`);
  for (const r of idle) expect(r.subrequests).toBe(0); // none to the database
  expect(tickerCalls).toBe(idle.length);
  expect(medianCpu).toBeLessThan(5); // Workers Free gives 10 ms

  // A user's own route enqueues a batch of as many jobs as one tick runs at once (TICK_CONCURRENCY 5).
  const batch = await invocation(async (ctx) => {
    // In workerd, cloudflare:workers' waitUntil belongs to this invocation; Node has no such module,
    // so the adapter's fallback (the latest ctx) is pointed at this one.
    rememberContext(ctx);
    const jobs = await worker.skiplock(env).enqueueBatch(Array.from({ length: 5 }, (_, i) => ({ task: 'echo' as const, payload: { message: `b${i}` } })));
    return jobs.map((r) => r.job.id);
  });
  console.log(`a user's route enqueueing 5 jobs, their tick included: ${batch.subrequests} subrequests, ${batch.cpuMs.toFixed(1)} ms CPU`);
  expect(batch.subrequests).toBeLessThanOrEqual(FREE_SUBREQUESTS);
  const rows = await db.sql.query(statement(`SELECT status FROM skiplock.job WHERE id = ANY($1::bigint[])`, [batch.value]));
  expect(rows.map((r) => r.status)).toEqual(['DONE', 'DONE', 'DONE', 'DONE', 'DONE']);

});
