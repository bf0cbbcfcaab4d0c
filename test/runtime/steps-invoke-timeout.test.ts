/**
 * Issue 21 item 5: ctx.invoke applies the rule enqueue applies at the HTTP edge
 * (refuseUnfittableTimeouts): a child whose timeout no tick of the deployment can give
 * (TickOptions.maxJobTimeoutMs, default budgetMs − marginMs) is not enqueued; the invoke rejects
 * with a PermanentError the handler can catch, instead of a parent WAITING forever.
 */
import { afterAll, beforeAll, beforeEach, expect, test } from 'vitest';
import { z } from 'zod';
import { createSkiplock, defineTask, PermanentError } from '../../src/index.ts';
import { statement } from '../../src/store/sql.ts';
import { createTestDb, type TestDb } from '../support/db.ts';

let db: TestDb;
beforeAll(async () => {
  db = await createTestDb();
});
afterAll(() => db.drop());
beforeEach(() => db.emptyJobs());

const quiet = () => {};
const slowChild = defineTask({ name: 'slow-child', payload: z.object({}), timeoutMs: 60_000, handler: () => 'slow' });
const quickChild = defineTask({ name: 'quick-child', payload: z.object({}), timeoutMs: 1_000, handler: () => 'quick' });
const caught: unknown[] = [];
const parent = defineTask({
  name: 'invoking-parent',
  payload: z.object({ child: z.string(), timeoutMs: z.number().optional() }),
  handler: async (p, ctx) => {
    try {
      return await ctx.invoke('child', p.child, {});
    } catch (error) {
      caught.push(error);
      return 'caught';
    }
  },
});
const sk = () => createSkiplock({ sql: db.sql, tasks: [slowChild, quickChild, parent], log: quiet, tick: { budgetMs: 20_000 } });
const count = async () => Number((await db.sql.query(statement('SELECT count(*)::int AS n FROM skiplock.job')))[0]!.n);

test('a child longer than any tick here: the invoke throws a PermanentError, nothing enqueued', async () => {
  caught.length = 0;
  const job = await sk().enqueue({ task: 'invoking-parent', payload: { child: 'slow-child' } });
  await sk().tick({ untilIdle: true });
  expect(await sk().getJob(job.id)).toMatchObject({ status: 'DONE', result: 'caught' });
  expect(caught).toHaveLength(1);
  expect(caught[0]).toBeInstanceOf(PermanentError);
  expect(String((caught[0] as Error).message)).toMatch(/timeoutMs 60000 is longer than any tick of this deployment can run \(19000 ms\)/);
  expect(await count()).toBe(1);
});

test('maxJobTimeoutMs: a deployment whose longest tick is longer than this one says so', async () => {
  caught.length = 0;
  const job = await sk().enqueue({ task: 'invoking-parent', payload: { child: 'slow-child' } });
  for (let i = 0; i < 3; i++) await sk().tick({ untilIdle: true, maxJobTimeoutMs: 69_000, budgetMs: 70_000 });
  expect(await sk().getJob(job.id)).toMatchObject({ status: 'DONE', result: 'slow' });
  expect(caught).toHaveLength(0);
});

test('a child that fits is invoked as before', async () => {
  const job = await sk().enqueue({ task: 'invoking-parent', payload: { child: 'quick-child' } });
  for (let i = 0; i < 3; i++) await sk().tick({ untilIdle: true });
  expect(await sk().getJob(job.id)).toMatchObject({ status: 'DONE', result: 'quick' });
});
