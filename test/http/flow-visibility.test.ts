/**
 * Flow control made visible (issue 14 item 5): /metrics and the dashboard show the keys at their
 * limit and the jobs waiting on one; a QUEUED job's page says why it waits.
 */
import { afterAll, beforeAll, expect, test } from 'vitest';
import { z } from 'zod';
import { defineTask } from '../../src/index.ts';
import { getPage, logIn } from './dashboard-support.ts';
import { createTestApp, type TestApp } from './helpers.ts';

const T0 = Date.parse('2033-01-01T00:00:00Z');
let now = T0;
let t: TestApp;
let release!: () => void;
const gate = new Promise<void>((resolve) => (release = resolve));
const tasks = [
  defineTask({ name: 'per-tenant', payload: z.object({ tenant: z.string() }), concurrency: { limit: 1, key: (p) => p.tenant }, handler: () => gate }),
  defineTask({ name: 'api', payload: z.object({ account: z.string() }), rateLimit: { limit: 2, periodMs: 60_000, key: (p) => p.account }, handler: () => {} }),
  defineTask({ name: 'plain', payload: z.object({}), handler: () => {} }),
];
let ticking: Promise<unknown>;
const stop = new AbortController();

beforeAll(async () => {
  t = await createTestApp({ tasks, skiplock: { now: () => new Date(now) } });
  await t.skiplock.enqueueBatch(Array.from({ length: 5 }, () => ({ task: 'api', payload: { account: 'a1' } })));
  await t.skiplock.tick({ untilIdle: true, concurrency: 3 }); // api: 2 start, 3 wait for the window
  await t.skiplock.enqueueBatch([
    { task: 'per-tenant', payload: { tenant: 'acme' } },
    { task: 'per-tenant', payload: { tenant: 'acme' } },
    { task: 'per-tenant', payload: { tenant: 'acme' } },
    { task: 'per-tenant', payload: { tenant: 'globex' } },
  ]);
  // per-tenant: acme and globex run (held at the gate); two acme jobs wait for the slot.
  ticking = t.skiplock.tick({ budgetMs: 20_000, concurrency: 10, pollIntervalMs: 20, signal: stop.signal });
  for (let i = 0; i < 200 && (await t.skiplock.stats()).counts.RUNNING < 2; i++) await new Promise((r) => setTimeout(r, 10));
});
afterAll(async () => {
  release();
  stop.abort();
  await ticking;
  await t.close();
});

test('flowStatus lists the keys at their limit and the jobs waiting on them', async () => {
  const flow = await t.skiplock.flowStatus();
  expect(flow.byTask).toEqual({
    'per-tenant': { waiting: 2, keysAtLimit: { concurrency: 2, global: 0, rate: 0 } },
    api: { waiting: 3, keysAtLimit: { concurrency: 0, global: 0, rate: 1 } },
  });
  expect(flow.keysAtLimit).toEqual([
    { task: 'api', kind: 'rate', key: 'a1', inUse: 2, limit: 2, waiting: 3, opensAt: new Date(T0 + 60_000) },
    { task: 'per-tenant', kind: 'concurrency', key: 'acme', inUse: 1, limit: 1, waiting: 2, opensAt: null },
    { task: 'per-tenant', kind: 'concurrency', key: 'globex', inUse: 1, limit: 1, waiting: 0, opensAt: null },
  ]);
});

test('/metrics exports them by task, never per key', async () => {
  const text = await (await t.call('GET', '/metrics')).text();
  expect(text).toContain('skiplock_flow_jobs_waiting{task="per-tenant"} 2');
  expect(text).toContain('skiplock_flow_jobs_waiting{task="api"} 3');
  expect(text).toContain('skiplock_flow_keys_at_limit{limit="concurrency",task="per-tenant"} 2');
  expect(text).toContain('skiplock_flow_keys_at_limit{limit="rate",task="api"} 1');
  expect(text).not.toContain('acme');
});

test('the dashboard shows them, and a waiting job says why', async () => {
  const cookie = await logIn(t);
  const overview = await (await getPage(t, '/', cookie)).text();
  expect(overview).toContain('Flow control');
  expect(overview).toContain('acme');
  const { jobs } = await t.skiplock.listJobs({ status: 'QUEUED', task: 'per-tenant' });
  const page = await (await getPage(t, `/jobs/${jobs[0]!.id}`, cookie)).text();
  expect(page).toContain('held back by its concurrency limit: 1 of 1 jobs of key &quot;acme&quot; are running');
  const api = (await t.skiplock.listJobs({ status: 'QUEUED', task: 'api' })).jobs[0]!;
  const apiPage = await (await getPage(t, `/jobs/${api.id}`, cookie)).text();
  expect(apiPage).toContain('held back by its rate limit: 2 of 2 starts of key &quot;a1&quot; in the last 60000 ms; the next may start at 2033-01-01T00:01:00.000Z');
  expect((await t.skiplock.flowWait(api.id))?.rate).toEqual({ starts: 2, limit: 2, periodMs: 60_000, opensAt: new Date(T0 + 60_000) });
});
