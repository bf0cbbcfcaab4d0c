/** Cancel and retry across real runs: ticks move jobs to DONE, DEAD, RUNNING and CANCELLED. */
import { afterAll, beforeAll, expect, test } from 'vitest';
import { createTestApp, type TestApp } from './helpers.ts';

let t: TestApp;
beforeAll(async () => (t = await createTestApp({ app: { tick: { untilIdle: true, budgetMs: 20_000, pollIntervalMs: 10, leaseMs: 3_000 } } })));
// leaseMs 3 000: a heartbeat (which sees a cancel) each second, so the second cancel of the RUNNING
// job below lands before it even on a loaded machine (at 300 ms it sometimes did not).
afterAll(() => t.close());

async function enqueue(body: unknown) {
  const res = await t.call('POST', '/v1/jobs', { body });
  expect(res.status).toBe(201);
  return ((await res.json()) as any).job;
}

async function tick() {
  const res = await t.call('POST', '/v1/tick');
  expect(res.status).toBe(200);
  return (await res.json()) as any;
}

test('a DONE job can be neither cancelled nor retried (409)', async () => {
  const job = await enqueue({ task: 'echo', payload: { message: 'done' } });
  expect(await tick()).toMatchObject({ claimed: 1, done: 1 });
  const cancel = await t.call('POST', `/v1/jobs/${job.id}/cancel`);
  expect(cancel.status).toBe(409);
  expect(await cancel.json()).toMatchObject({ error: { code: 'conflict' } });
  expect((await t.call('POST', `/v1/jobs/${job.id}/retry`)).status).toBe(409);
  expect((await t.skiplock.getJob(job.id))?.status).toBe('DONE');
});

test('a DEAD job is retried: QUEUED, due now, attempts 0, and it runs again', async () => {
  const job = await enqueue({ task: 'poison', payload: {} });
  expect(await tick()).toMatchObject({ claimed: 1, dead: 1 });
  expect((await t.call('POST', `/v1/jobs/${job.id}/cancel`)).status).toBe(409);

  const res = await t.call('POST', `/v1/jobs/${job.id}/retry`);
  expect(res.status).toBe(200);
  const retried = ((await res.json()) as any).job;
  expect(retried).toMatchObject({ status: 'QUEUED', attempts: 0, finishedAt: null, lastError: expect.stringContaining('poison') });
  expect(await tick()).toMatchObject({ claimed: 1, dead: 1 });
  expect(await t.skiplock.getJob(job.id)).toMatchObject({ status: 'DEAD', attempts: 1 });
});

test('cancelling a RUNNING job: 202, then the tick aborts its handler and the job ends CANCELLED', async () => {
  const job = await enqueue({ task: 'sleep', payload: { ms: 600_000 }, timeoutMs: 15_000 });
  const ticking = tick();
  // Wait (without a clock) until the tick has claimed it.
  while ((await t.skiplock.getJob(job.id))?.status !== 'RUNNING') await new Promise((resolve) => setTimeout(resolve, 10));

  // A RUNNING job cannot be retried. Asked before the cancel: once it is asked, the next heartbeat
  // (every leaseMs / 3) may end the job CANCELLED at any moment, and a CANCELLED job can be retried.
  expect((await t.call('POST', `/v1/jobs/${job.id}/retry`)).status).toBe(409);
  const res = await t.call('POST', `/v1/jobs/${job.id}/cancel`);
  expect(res.status).toBe(202);
  expect(((await res.json()) as any).job).toMatchObject({ id: job.id, status: 'RUNNING' });
  // Asking twice is harmless (within the heartbeat's second: leaseMs is 3 000 here).
  expect((await t.call('POST', `/v1/jobs/${job.id}/cancel`)).status).toBe(202);

  expect(await ticking).toMatchObject({ claimed: 1, cancelled: 1 });
  expect(await t.skiplock.getJob(job.id)).toMatchObject({ status: 'CANCELLED', cancelRequested: false });
  // And a cancelled job can be retried.
  expect((await t.call('POST', `/v1/jobs/${job.id}/retry`)).status).toBe(200);
  expect((await t.call('POST', `/v1/jobs/${job.id}/cancel`)).status).toBe(200);
});

test('POST /v1/jobs/retry-dead puts DEAD jobs back in the queue, all or one task, a bounded number at a time', async () => {
  await t.db.sql.query({ text: `DELETE FROM skiplock.job`, values: [] });
  const dead = await Promise.all([
    enqueue({ task: 'poison', payload: {} }),
    enqueue({ task: 'poison', payload: {} }),
    enqueue({ task: 'poison', payload: {} }),
    enqueue({ task: 'flaky', payload: { failTimes: 1 }, maxAttempts: 1 }),
  ]);
  const cancelled = await enqueue({ task: 'echo', payload: { message: 'no' }, delayMs: 3_600_000 });
  await t.call('POST', `/v1/jobs/${cancelled.id}/cancel`);
  expect(await tick()).toMatchObject({ claimed: 4, dead: 4 });

  // One task, two at most: the rest stays DEAD.
  const some = await t.call('POST', '/v1/jobs/retry-dead', { body: { task: 'poison', limit: 2 } });
  expect(some.status).toBe(200);
  expect(await some.json()).toEqual({ retried: 2 });
  const statuses = async () => Object.fromEntries(await Promise.all(dead.map(async (j: any) => [j.id, (await t.skiplock.getJob(j.id))!.status])));
  expect(Object.values(await statuses()).sort()).toEqual(['DEAD', 'DEAD', 'QUEUED', 'QUEUED']);
  // Every task: the two left (a CANCELLED job is a person's decision, not a failure: left alone).
  expect(await (await t.call('POST', '/v1/jobs/retry-dead', { body: {} })).json()).toEqual({ retried: 2 });
  expect(Object.values(await statuses())).toEqual(['QUEUED', 'QUEUED', 'QUEUED', 'QUEUED']);
  expect(await t.skiplock.getJob(dead[0].id)).toMatchObject({ attempts: 0, finishedAt: null, lastError: expect.stringContaining('poison') });
  expect((await t.skiplock.getJob(cancelled.id))?.status).toBe('CANCELLED');
  expect(await (await t.call('POST', '/v1/jobs/retry-dead', { body: {} })).json()).toEqual({ retried: 0 });

  for (const body of [{ limit: 0 }, { limit: 1001 }, { task: '' }, { task: 'x'.repeat(201) }, { other: 1 }, []]) {
    const res = await t.call('POST', '/v1/jobs/retry-dead', { body });
    expect(res.status, JSON.stringify(body)).toBe(400);
  }
});
