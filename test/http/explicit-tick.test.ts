/**
 * GET/POST /v1/tick is an explicit tick (a person, a script, a platform cron with API_TOKEN): it
 * ticks what is due and answers once idle. It does not poll until its budget ends, nor wait for an
 * instant to come — on platforms that bill by duration that wait is the user's money (issue 31:
 * `POST /v1/tick` with nothing due held its request for 54 s). A job it claimed keeps it until done.
 */
import { afterAll, beforeAll, beforeEach, expect, test } from 'vitest';
import { statement } from '../../src/store/sql.ts';
import { createTestApp, type TestApp } from './helpers.ts';

let t: TestApp;
beforeAll(async () => {
  // The tick options a platform gives its app (no untilIdle): the route's own default decides.
  t = await createTestApp({ app: { tick: { budgetMs: 25_000, pollIntervalMs: 50 } } });
});
afterAll(() => t.close());
beforeEach(() => t.db.emptyJobs());

const statusOf = async (id: string) =>
  String((await t.db.sql.query<{ status: string }>(statement(`SELECT status FROM skiplock.job WHERE id = $1`, [id])))[0]!.status);

for (const method of ['POST', 'GET'] as const) {
  test(`${method} /v1/tick with only a job due later: answers without waiting for it (nor for the budget)`, async () => {
    const later = await t.skiplock.enqueue({ task: 'echo', payload: { message: 'later' }, delayMs: 8_000 });
    const asked = Date.now();
    const response = await t.call(method, '/v1/tick');
    expect(response.status).toBe(200);
    expect(await response.json()).toMatchObject({ claimed: 0, done: 0 });
    // It answered before the job's instant, leaving the job for its own trigger: it did not wait for it.
    expect(Date.now() - asked).toBeLessThan(8_000);
    expect(await statusOf(later.id)).toBe('QUEUED');
  });
}

test('POST /v1/tick ticks what is due (a running job keeps it until done), then answers', async () => {
  const now = await t.skiplock.enqueue({ task: 'sleep', payload: { ms: 300 } });
  const later = await t.skiplock.enqueue({ task: 'echo', payload: { message: 'later' }, delayMs: 8_000 });
  const response = await t.call('POST', '/v1/tick');
  expect(await response.json()).toMatchObject({ claimed: 1, done: 1 });
  expect(await statusOf(now.id)).toBe('DONE');
  expect(await statusOf(later.id)).toBe('QUEUED');
});

test('a deployment that asks for polling (tick.untilIdle: false) still gets it', async () => {
  const polling = await createTestApp({ app: { tick: { budgetMs: 3_000, marginMs: 500, pollIntervalMs: 50, untilIdle: false } } });
  try {
    const job = await polling.skiplock.enqueue({ task: 'echo', payload: { message: 'soon' }, delayMs: 300, timeoutMs: 500 });
    const response = await polling.call('POST', '/v1/tick');
    // Polling until its budget ends, it claims the job once due.
    expect(await response.json()).toMatchObject({ done: 1 });
    const [row] = await polling.db.sql.query<{ status: string }>(statement(`SELECT status FROM skiplock.job WHERE id = $1`, [job.id]));
    expect(row!.status).toBe('DONE');
  } finally {
    await polling.close();
  }
});
