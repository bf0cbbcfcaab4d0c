/**
 * Cloudflare's six simultaneous connections per invocation, imposed in Node: a Worker invocation
 * can have six connections waiting for response headers; a seventh waits until one of them has
 * its headers. Handlers' fetches and the tick's own Neon HTTP requests (claims, result writes,
 * heartbeats) share the six. Local workerd does not enforce the cap, so this test wraps global
 * fetch with a gate that does, and runs the Worker's tick, with the Worker's default options,
 * over the Neon HTTP driver and the local Neon proxy.
 *
 * The handlers each hold a fetch open longer than their lease; another invocation's reaper runs
 * meanwhile. The leases must hold: each job runs once.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, test, vi } from 'vitest';
import { z } from 'zod';
import { startNeonProxy, type NeonProxy } from '../../src/dev/neon-proxy.ts';
import { PROJECT_ROOT } from '../../src/dev/wrangler-dev.ts';
import { createSkiplock, defineTask } from '../../src/index.ts';
import { CLOUDFLARE_CONNECTIONS, createDeployments, type Env, workerTickOptions } from '../../src/platform/cloudflare/deployment.ts';
import { createNeonHttpDriver } from '../../src/store/drivers/neon-http.ts';
import { statement } from '../../src/store/sql.ts';
import { createTestDb, type TestDb } from '../support/db.ts';

/** How long the slow server keeps each handler's request waiting for its headers. */
const HOLD_MS = 4_000;
/** The lease of these jobs (their timeout is longer, so they are heartbeated every third of it). */
const LEASE_MS = 2_000;
const JOBS = 10;

let db: TestDb;
let proxy: NeonProxy;
let slow: Server;
let slowUrl: string;

beforeAll(async () => {
  db = await createTestDb();
  proxy = await startNeonProxy();
  slow = createServer((_req, res) => {
    const timer = setTimeout(() => res.end('ok'), HOLD_MS);
    res.on('close', () => clearTimeout(timer));
  });
  await new Promise<void>((resolve) => slow.listen(0, '127.0.0.1', resolve));
  slowUrl = `http://127.0.0.1:${(slow.address() as AddressInfo).port}/slow`;
});

afterAll(async () => {
  slow?.closeAllConnections();
  await new Promise((resolve) => slow?.close(resolve));
  await proxy?.close();
  await db?.drop();
});

/**
 * Global fetch, as a Workers invocation sees it: at most `lanes` requests waiting for headers,
 * the others queued in order. Records how long the tick's own statements (the Neon endpoint) queued.
 */
function imposeConnectionCap(lanes: number) {
  const original = globalThis.fetch;
  const queue: (() => void)[] = [];
  let open = 0;
  const statementWaits: number[] = [];
  const acquire = (signal: AbortSignal | null | undefined) =>
    new Promise<void>((resolve, reject) => {
      if (open < lanes) return void ((open += 1), resolve());
      const go = () => {
        signal?.removeEventListener('abort', onAbort);
        open += 1;
        resolve();
      };
      const onAbort = () => {
        queue.splice(queue.indexOf(go), 1);
        reject(signal!.reason);
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      queue.push(go);
    });
  const release = () => {
    open -= 1;
    queue.shift()?.();
  };
  globalThis.fetch = async (input: string | URL | Request, init?: RequestInit) => {
    const queuedAt = performance.now();
    await acquire(init?.signal);
    if (String(input instanceof Request ? input.url : input).startsWith(proxy.fetchEndpoint)) statementWaits.push(performance.now() - queuedAt);
    try {
      return await original(input, init); // resolves with the headers: the lane is free again
    } finally {
      release();
    }
  };
  return { statementWaits, restore: () => void (globalThis.fetch = original) };
}

test("the Worker's default concurrency and its wrangler.toml agree", async () => {
  const toml = await readFile(join(PROJECT_ROOT, 'wrangler.toml'), 'utf8');
  const shipped = /^TICK_CONCURRENCY\s*=\s*(\d+)/m.exec(toml)?.[1];
  expect(Number(shipped)).toBe(workerTickOptions({}).cronTick.concurrency);
});

test('a TICK_CONCURRENCY that can take every connection is warned about when the Worker starts', () => {
  const warn = vi.spyOn(console, 'warn').mockImplementation(() => {});
  try {
    const deploymentFor = createDeployments({ tasks: [] });
    // TICKER = "cron": without the Durable Object binding the Worker otherwise warns about that (issue 22).
    const env = (vars: Record<string, string>) => ({ DATABASE_URL: 'postgres://u:p@db.example/x', API_TOKEN: 'connections-token-0123456789', TICKER: 'cron', ...vars }) as Env;
    deploymentFor(env({}));
    deploymentFor(env({ TICK_CONCURRENCY: '5' }));
    expect(warn).not.toHaveBeenCalled();
    deploymentFor(env({ TICK_CONCURRENCY: '10' }));
    expect(warn).toHaveBeenCalledOnce();
    expect(String(warn.mock.calls[0]![0])).toMatch(/TICK_CONCURRENCY=10.*6 connections/);
  } finally {
    warn.mockRestore();
  }
});

test('six connections per invocation: with handlers holding a fetch past their lease, the leases hold and each job runs once', async () => {
  const starts = new Map<string, number>();
  const slowCall = defineTask({
    name: 'slow-call',
    payload: z.object({ n: z.number() }),
    timeoutMs: 20_000,
    handler: async (_payload, ctx) => {
      starts.set(ctx.job.id, (starts.get(ctx.job.id) ?? 0) + 1);
      const response = await fetch(slowUrl, { signal: ctx.signal });
      return { status: response.status, body: await response.text() };
    },
  });
  const worker = createSkiplock({ sql: createNeonHttpDriver(db.url, { fetchEndpoint: proxy.fetchEndpoint }), tasks: [slowCall], log: () => {} });
  // Another invocation (a later minute's cron, say) reaps expired leases meanwhile; over pg, outside the cap.
  const elsewhere = createSkiplock({ sql: db.sql, tasks: [slowCall], log: () => {} });
  await elsewhere.enqueueBatch(Array.from({ length: JOBS }, (_, n) => ({ task: 'slow-call', payload: { n } })));

  const { cronTick } = workerTickOptions({});
  const cap = imposeConnectionCap(CLOUDFLARE_CONNECTIONS);
  let reaped = 0;
  let ticking = true;
  const reaper = (async () => {
    while (ticking) {
      reaped += await elsewhere.reap();
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  })();
  let result;
  try {
    // Workers Paid's subrequests (SUBREQUEST_LIMIT=10000): a 2 s lease over a 60 s budget may need
    // 90 heartbeats, more than Free's 50, so the tick would keep them and claim nothing there.
    result = await worker.tick({ ...cronTick, subrequestLimit: 10_000, budgetMs: 60_000, leaseMs: LEASE_MS, untilIdle: true });
  } finally {
    ticking = false;
    cap.restore();
    await reaper;
  }
  const rows = await db.sql.query<{ status: string; attempts: number }>(statement(`SELECT status, attempts FROM skiplock.job ORDER BY id`));
  console.log(`concurrency ${cronTick.concurrency}: the tick's statements waited up to ${Math.round(Math.max(...cap.statementWaits))} ms for a connection; reaped ${reaped}`);

  expect([...starts.values()]).toEqual(Array(JOBS).fill(1));
  expect(reaped).toBe(0);
  expect(result.staleWrites).toBe(0);
  expect(rows).toEqual(Array(JOBS).fill({ status: 'DONE', attempts: 1 }));
});
