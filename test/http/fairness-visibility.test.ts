/**
 * Fair share made visible (issue 35 item 1): skiplock.fairnessStatus() and the dashboard's Fair
 * share card give, per priority level, the lanes taking turns and where the next claim starts,
 * and the keys with the most due jobs; a job's page shows its fairness key.
 */
import { afterAll, beforeAll, expect, test } from 'vitest';
import { z } from 'zod';
import { defineTask } from '../../src/index.ts';
import { completeAndClaim } from '../../src/store/claim.ts';
import { getPage, logIn } from './dashboard-support.ts';
import { createTestApp, type TestApp } from './helpers.ts';

const T0 = Date.parse('2033-01-01T00:00:00Z');
let t: TestApp;
const tasks = [
  defineTask({ name: 'mail', payload: z.object({ tenant: z.string() }), fairness: { key: (p) => p.tenant }, handler: () => {} }),
  defineTask({ name: 'plain', payload: z.object({}), handler: () => {} }),
];

beforeAll(async () => {
  t = await createTestApp({ tasks, skiplock: { now: () => new Date(T0) } });
});
afterAll(() => t.close());

test('no fair job: an empty status, and no card', async () => {
  expect(await t.skiplock.fairnessStatus()).toEqual({ levels: [], keys: [] });
  const cookie = await logIn(t);
  expect(await (await getPage(t, '/', cookie)).text()).not.toContain('Fair share');
});

test('lanes per level, the cursor after a claim, the keys with the most due jobs', async () => {
  await t.skiplock.enqueueBatch([
    ...Array.from({ length: 5 }, () => ({ task: 'mail', payload: { tenant: 'acme' } })),
    ...Array.from({ length: 2 }, () => ({ task: 'mail', payload: { tenant: 'globex' } })),
    { task: 'mail', payload: { tenant: 'initech' }, priority: 3 },
    { task: 'plain', payload: {} },
  ]);
  const before = await t.skiplock.fairnessStatus();
  expect(before.levels).toEqual([
    { priority: 3, lanes: 1, due: 1 },
    { priority: 0, lanes: 3, due: 7 },
  ]);
  expect(before.keys.map((k) => [k.key, k.priority, k.due, k.running])).toEqual([['acme', 0, 5, 0], ['globex', 0, 2, 0], ['initech', 3, 1, 0]]);
  expect(before.keys[0]!.oldestDueAt).toEqual(new Date(T0));
  // A claim of 3: initech (level 3), then level 0 from its start: the keyless lane, acme.
  await t.skiplock.sql.query(completeAndClaim({
    now: new Date(T0), workerId: 'w', results: [], limit: 3, budgetMs: 60_000, tasks: ['mail', 'plain'], leaseMs: 60_000, leaseGraceMs: 1_000,
  }));
  const after = await t.skiplock.fairnessStatus();
  expect(after.levels).toEqual([{ priority: 0, lanes: 2, due: 6, cursor: 'acme' }]);
  const cookie = await logIn(t);
  const page = await (await getPage(t, '/', cookie)).text();
  expect(page).toContain('Fair share');
  expect(page).toMatch(/<td class="mono">acme<\/td><td class="num">0<\/td><td class="num">4<\/td>/);
  expect(page).toContain('<span class="mono">acme</span>');
  const [job] = (await t.skiplock.listJobs({ task: 'mail', status: 'QUEUED' })).jobs;
  expect(await (await getPage(t, `/jobs/${job!.id}`, cookie)).text()).toMatch(/Fairness key<\/dt><dd class="mono">(acme|globex)</);
});

test('over HTTP: an enqueue gives fairnessKey, a job shows it, a bad one is a 400 that writes nothing', async () => {
  const created = await t.call('POST', '/v1/jobs', { body: { task: 'plain', payload: {}, fairnessKey: 'tenant-9' } });
  expect(created.status).toBe(201);
  const { job } = (await created.json()) as { job: { id: string; fairnessKey: string | null; batchKey: string | null } };
  expect(job).toMatchObject({ fairnessKey: 'tenant-9', batchKey: null });
  expect(await (await t.call('GET', `/v1/jobs/${job.id}`)).json()).toMatchObject({ job: { fairnessKey: 'tenant-9' } });
  const before = (await t.skiplock.stats()).counts.QUEUED;
  for (const fairnessKey of ['', 'x'.repeat(256), 42]) {
    const refused = await t.call('POST', '/v1/jobs', { body: { task: 'plain', payload: {}, fairnessKey } });
    expect(refused.status).toBe(400);
    expect(await refused.json()).toMatchObject({ error: { code: 'invalid_request' } });
  }
  expect((await t.skiplock.stats()).counts.QUEUED).toBe(before);
});
