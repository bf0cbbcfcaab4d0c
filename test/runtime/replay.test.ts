/**
 * The replay check (src/runtime/steps/replay.ts): the current code of a task against the steps its
 * in-flight jobs recorded. It catches an inserted, removed, renamed and reordered step, passes an
 * appended one and a ctx.patched insert, runs no step function, and writes nothing.
 */
import { afterAll, beforeAll, expect, test } from 'vitest';
import { z } from 'zod';
import { createSkiplock, defineTask, type TaskContext } from '../../src/index.ts';
import { statement } from '../../src/store/sql.ts';
import { createTestDb, type TestDb } from '../support/db.ts';

let db: TestDb;
let jobId: string;
const ran: string[] = [];

/** `order` with these steps before and after its hour's wait; a `patched:` prefix puts a step behind ctx.patched. */
function flow(before: string[], after: string[] = ['c']) {
  const step = async (ctx: TaskContext, id: string) => {
    if (id.startsWith('patched:')) {
      if (ctx.patched(id.slice(8))) await ctx.step(id.slice(8), () => (ran.push(id), id));
      return;
    }
    await ctx.step(id, () => (ran.push(id), id));
  };
  return defineTask({
    name: 'order',
    payload: z.object({}),
    handler: async (_p, ctx) => {
      for (const id of before) await step(ctx, id);
      await ctx.sleep('wait', 3600_000);
      for (const id of after) await step(ctx, id);
      return 'done';
    },
  });
}

async function dump() {
  const [row] = await db.sql.query(statement(
    `SELECT (SELECT jsonb_agg(to_jsonb(j) ORDER BY id) FROM skiplock.job j) AS jobs,
            (SELECT jsonb_agg(to_jsonb(s) ORDER BY job_id, seq) FROM skiplock.job_step s) AS steps`,
  ));
  return JSON.stringify(row);
}

beforeAll(async () => {
  db = await createTestDb();
  const v1 = createSkiplock({ sql: db.sql, tasks: [flow(['a', 'b'])], log: () => {} });
  jobId = (await v1.enqueue({ task: 'order', payload: {} })).id;
  await v1.tick({ untilIdle: true });
  ran.length = 0;
});
afterAll(() => db.drop());

const check = (before: string[], after?: string[]) => createSkiplock({ sql: db.sql, tasks: [flow(before, after)], log: () => {} }).checkReplay();

test('catches an inserted, a removed, a renamed and a reordered step; writes nothing; runs no step', async () => {
  const before = await dump();
  const cases: [string[], RegExp][] = [
    [['a', 'x', 'b'], /step 1 was "b" \(step\) in an earlier run, and is "x" \(step\) now/],
    [['a'], /"wait" was step 2 of an earlier run and is step 1 now \(where "b" was recorded\)/],
    [['a', 'b2'], /step 1 was "b" \(step\) in an earlier run, and is "b2" \(step\) now/],
    [['b', 'a'], /"b" was step 1 of an earlier run and is step 0 now/],
  ];
  for (const [steps, reason] of cases) {
    const result = await check(steps);
    expect(result, steps.join(',')).toMatchObject({ checked: 1, failures: [{ id: jobId, task: 'order', reason: expect.stringMatching(reason) }] });
  }
  expect(await dump()).toBe(before);
  expect(ran).toEqual([]);
});

test('passes an appended step and a ctx.patched insert; the same code passes', async () => {
  const before = await dump();
  expect(await check(['a', 'b'], ['c', 'd'])).toEqual({ checked: 1, failures: [] });
  expect(await check(['a', 'patched:fraud-check', 'b'])).toEqual({ checked: 1, failures: [] });
  expect(await check(['a', 'b'])).toEqual({ checked: 1, failures: [] });
  expect(await dump()).toBe(before);
  expect(ran).toEqual([]);
});

test('filters and bad input: another status checks nothing; an unregistered task is refused', async () => {
  const s = createSkiplock({ sql: db.sql, tasks: [flow(['a', 'x'])], log: () => {} });
  expect(await s.checkReplay({ status: 'done' })).toEqual({ checked: 0, failures: [] });
  expect((await s.checkReplay({ ids: [jobId], limit: 5 })).failures).toHaveLength(1);
  await expect(s.checkReplay({ task: 'nope' })).rejects.toMatchObject({ code: 'unknown_task' });
  await expect(s.checkReplay({ limit: 0 })).rejects.toMatchObject({ code: 'invalid_request' });
});
