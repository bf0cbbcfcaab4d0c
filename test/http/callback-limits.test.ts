/**
 * A callback POST whose body is over one step's output limit (256 KiB of JSON) is a 413 that
 * writes nothing: the wait stays open, and a POST within the limit still completes it (issue 30).
 */
import { afterAll, beforeAll, expect, test } from 'vitest';
import { z } from 'zod';
import { defineTask } from '../../src/runtime/tasks/task.ts';
import { statement } from '../../src/store/sql.ts';
import { createTestApp, type TestApp } from './helpers.ts';

const urls: string[] = [];
const approval = defineTask({
  name: 'approval',
  payload: z.object({}),
  timeoutMs: 2_000,
  handler: async (_p, ctx) => {
    urls.push((await ctx.createCallback('approve')).url);
    return ctx.waitForCallback('approve');
  },
});

let t: TestApp;
beforeAll(async () => {
  t = await createTestApp({
    tasks: [approval],
    skiplock: { callbacks: { secret: 'a-callback-secret-of-some-length', publicUrl: 'https://jobs.example.com' } },
    app: { runInBackground: () => {} },
  });
});
afterAll(() => t.close());

test('a 900 KiB callback body: 413 payload_too_large, nothing written; then a small one: 200', async () => {
  const job = await t.skiplock.enqueue({ task: 'approval', payload: {} });
  await t.skiplock.tick({ untilIdle: true, budgetMs: 5_000, pollIntervalMs: 10 });
  const path = new URL(urls[0]!).pathname;
  const steps = () => t.db.sql.query(statement(`SELECT status, output FROM skiplock.job_step WHERE job_id = $1`, [job.id]));

  const big = await t.call('POST', path, { body: { blob: 'x'.repeat(900 * 1024) }, token: null });
  expect(big.status).toBe(413);
  expect(await big.json()).toMatchObject({ error: { code: 'payload_too_large' } });
  expect(await steps()).toEqual([{ status: 'waiting', output: null }]);

  expect((await t.call('POST', path, { body: { approved: true }, token: null })).status).toBe(200);
  expect(await steps()).toEqual([{ status: 'done', output: { data: { approved: true } } }]);
});
