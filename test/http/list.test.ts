/** GET /v1/jobs: filters, bounded pages, and a cursor that stays correct while jobs are inserted. */
import { afterAll, beforeAll, expect, test } from 'vitest';
import { createTestApp, type TestApp } from './helpers.ts';

let t: TestApp;
beforeAll(async () => (t = await createTestApp()));
afterAll(() => t.close());

async function page(query: string) {
  const res = await t.call('GET', `/v1/jobs${query}`);
  expect(res.status, await res.clone().text()).toBe(200);
  return (await res.json()) as { jobs: any[]; nextCursor: string | null };
}

async function enqueueMany(n: number, task = 'echo', payload: unknown = { message: 'm' }) {
  const res = await t.call('POST', '/v1/jobs/batch', { body: { jobs: Array.from({ length: n }, () => ({ task, payload })) } });
  expect(res.status).toBe(201);
  return ((await res.json()) as any).jobs.map((j: any) => j.id as string);
}

/** Walks every page, calling `between` after each one. */
async function walk(query: string, between: () => Promise<unknown> = async () => {}) {
  const seen: string[] = [];
  let cursor: string | null = null;
  let pages = 0;
  do {
    const sep = query ? '&' : '?';
    const result = await page(`${query}${cursor ? `${sep}cursor=${encodeURIComponent(cursor)}` : ''}`);
    seen.push(...result.jobs.map((j) => j.id));
    cursor = result.nextCursor;
    pages += 1;
    await between();
  } while (cursor !== null);
  return { seen, pages };
}

test('newest first; pages that stay correct while jobs are inserted between them', async () => {
  const original = await enqueueMany(25);
  const { seen, pages } = await walk('?limit=10', () => enqueueMany(3));
  expect(pages).toBe(3);
  // Every job that existed at the start, exactly once, newest first; none of those inserted later.
  expect(seen).toEqual([...original].reverse());
});

test('the default page is 50 and the last page has nextCursor null', async () => {
  await enqueueMany(30);
  const first = await page('');
  expect(first.jobs).toHaveLength(50);
  expect(first.nextCursor).toEqual(expect.any(String));
  const all = await page('?limit=500');
  expect(all.nextCursor).toBeNull();
  expect(all.jobs.length).toBeLessThan(500);
});

test('a page exactly as long as what is left ends with nextCursor null', async () => {
  const ids = await enqueueMany(4, 'poison', {});
  const result = await page('?task=poison&limit=4');
  expect(result.jobs.map((j) => j.id)).toEqual([...ids].reverse());
  expect(result.nextCursor).toBeNull();
});

test('filters by status and task', async () => {
  const [cancelMe] = await enqueueMany(1, 'poison', {});
  await t.call('POST', `/v1/jobs/${cancelMe}/cancel`);
  const cancelled = await page('?status=CANCELLED');
  expect(cancelled.jobs.map((j) => j.id)).toEqual([cancelMe]);
  const both = await page('?status=QUEUED&task=poison&limit=2');
  expect(both.jobs.every((j) => j.status === 'QUEUED' && j.task === 'poison')).toBe(true);
  const walked = await walk('?status=QUEUED&task=poison&limit=2');
  expect(walked.seen).toHaveLength(4);
  expect((await page('?task=nothing-like-this')).jobs).toEqual([]);
});

test('status is read in any case, as the CLI reads --status', async () => {
  const upper = await page('?status=CANCELLED');
  expect(upper.jobs.length).toBeGreaterThan(0);
  for (const status of ['cancelled', 'Cancelled']) expect(await page(`?status=${status}`)).toEqual(upper);
});

test.each([
  ['limit=0'],
  ['limit=501'],
  ['limit=-1'],
  ['limit=abc'],
  ['limit=1.5'],
  ['limit=1&limit=2'],
  ['status=NOPE'],
  ['task='],
  ['task=%00'],
  ['cursor='],
  ['cursor=abc'],
  ['cursor=%00'],
  [`cursor=${'A'.repeat(200)}`],
  [`cursor=${btoa('j99999999999999999999')}`],
  [`cursor=${btoa('x12')}`],
  ['statu=QUEUED'],
])('?%s → 400 invalid_request', async (query) => {
  const res = await t.call('GET', `/v1/jobs?${query}`);
  expect(res.status).toBe(400);
  expect(await res.json()).toMatchObject({ error: { code: 'invalid_request', message: expect.any(String) } });
});
