/**
 * A batch's items on the dashboard and in the API (issue 35 item 2): a job of a batch task shows its
 * batch key and, while RUNNING, the other jobs claimed with it; GET /v1/jobs/:id says its batchKey.
 */
import { afterAll, beforeAll, expect, test } from 'vitest';
import { z } from 'zod';
import { defineTask } from '../../src/index.ts';
import { completeAndClaim } from '../../src/store/claim.ts';
import { createTestApp, type TestApp } from '../http/helpers.ts';
import { getPage, logIn } from '../http/dashboard-support.ts';

const mail = defineTask({
  name: 'mail',
  payload: z.object({ to: z.string() }),
  batch: { maxSize: 10, maxWaitMs: 0, key: (p) => p.to.split('@')[1]! },
  handler: async () => {},
});

let t: TestApp;
let cookie: string;
beforeAll(async () => {
  t = await createTestApp({ tasks: [mail] });
  cookie = await logIn(t);
});
afterAll(() => t.close());

test("a RUNNING item's page lists the jobs of its call; a QUEUED one shows its batch key", async () => {
  const jobs = (await t.skiplock.enqueueBatch(['a@x.test', 'b@x.test', 'c@x.test', 'd@y.test'].map((to) => ({ task: 'mail' as const, payload: { to } })))).map((r) => r.job);
  // Claimed as a worker does (the tick's statement), and kept RUNNING.
  const claimed = await t.skiplock.sql.query(
    completeAndClaim({
      now: null, workerId: 'worker-1#1', results: [], limit: 1, budgetMs: 3_600_000, tasks: ['mail'], leaseMs: 3_600_000, leaseGraceMs: 3_600_000,
      batches: [{ task: 'mail', max_size: 10, max_wait_ms: 0 }],
    }),
  );
  const ids = claimed.filter((row) => row.id !== null).map((row) => String(row.id)).sort();
  expect(ids).toEqual(jobs.slice(0, 3).map((j) => j.id).sort());
  const page = await (await getPage(t, `/jobs/${jobs[0]!.id}`, cookie)).text();
  expect(page).toContain('<dt>Batch key</dt><dd><code>x.test</code></dd>');
  const mates = /<dd data-batch-mates>(.*?)<\/dd>/s.exec(page)![1]!;
  expect(mates).toContain(`href="/jobs/${jobs[1]!.id}"`);
  expect(mates).toContain(`href="/jobs/${jobs[2]!.id}"`);
  expect(mates).not.toContain(`href="/jobs/${jobs[0]!.id}"`);
  const queued = await (await getPage(t, `/jobs/${jobs[3]!.id}`, cookie)).text();
  expect(queued).toContain('<dt>Batch key</dt><dd><code>y.test</code></dd>');
  expect(queued).not.toContain('data-batch-mates');
  expect(queued).toMatch(/data-batch-rule>runs in a call with its group's due jobs, once 10 are due or the oldest has waited/);
  const api = await (await t.call('GET', `/v1/jobs/${jobs[3]!.id}`)).json();
  expect(api).toMatchObject({ job: { id: jobs[3]!.id, batchKey: 'y.test' } });
});
