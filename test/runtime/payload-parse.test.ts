/**
 * DESIGN.md invariant 10: the handler receives the task schema's parse of the payload's JSON form,
 * the same value at every attempt; no transform runs on its own output; a payload whose JSON form
 * the schema refuses is refused at enqueue (invalid_payload, nothing written). Every path that
 * stores a payload is checked: enqueue, batch, enqueueStatement, debounce, ctx.enqueue, ctx.invoke,
 * static and dynamic schedules, rescheduleJob.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'vitest';
import { z } from 'zod';
import { createSkiplock, defineSchedule, defineTask, SkiplockError } from '../../src/index.ts';
import { statement } from '../../src/store/sql.ts';
import { createTestDb, type TestDb } from '../support/db.ts';

let db: TestDb;
beforeAll(async () => {
  db = await createTestDb();
});
afterAll(() => db.drop());
beforeEach(async () => {
  await db.emptyJobs('skiplock.schedule', 'skiplock.paused_task');
});

const quiet = () => {};
const seen: unknown[] = [];

/** 12.34 (dollars) → 1234 (cents): applied once, never to its own output. */
const cents = defineTask({
  name: 'cents',
  payload: z.object({ amount: z.number().transform((n) => Math.round(n * 100)) }),
  handler: (p) => {
    seen.push(p.amount);
    return p.amount;
  },
});
const dated = defineTask({
  name: 'dated',
  payload: z.object({ at: z.date() }),
  handler: () => null,
});
const coerced = defineTask({
  name: 'coerced',
  payload: z.object({ at: z.coerce.date() }),
  handler: (p) => {
    seen.push(p.at);
    return p.at.toISOString();
  },
});
const parent = defineTask({
  name: 'parent',
  payload: z.object({ via: z.enum(['enqueue', 'invoke', 'invoke-date']) }),
  handler: async (p, ctx) => {
    if (p.via === 'enqueue') return (await ctx.enqueue({ task: 'cents', payload: { amount: 12.34 } })).id;
    if (p.via === 'invoke') return ctx.invoke('child', 'cents', { amount: 12.34 });
    try {
      await ctx.invoke('child', 'dated', { at: new Date() });
    } catch (error) {
      return (error as SkiplockError).code;
    }
    return 'invoked';
  },
});
const tasks = [cents, dated, coerced, parent];

function sk(schedules: Parameters<typeof createSkiplock>[0]['schedules'] = [], now?: () => Date) {
  return createSkiplock({ sql: db.sql, tasks, schedules, log: quiet, ...(now && { now }) });
}
async function jobCount() {
  const [row] = await db.sql.query(statement('SELECT count(*)::int AS n FROM skiplock.job'));
  return Number(row!.n);
}
async function runAll(skiplock = sk()) {
  seen.length = 0;
  await skiplock.tick({ untilIdle: true });
  return [...seen];
}
async function refused(promise: Promise<unknown> | (() => unknown)): Promise<SkiplockError> {
  try {
    await (typeof promise === 'function' ? promise() : promise);
  } catch (error) {
    expect(error).toBeInstanceOf(SkiplockError);
    return error as SkiplockError;
  }
  throw new Error('not refused');
}

describe('a transform runs once', () => {
  test('enqueue: 12.34 reaches the handler as 1234, stored as given', async () => {
    const job = await sk().enqueue({ task: 'cents', payload: { amount: 12.34 } });
    expect(job.payload).toEqual({ amount: 12.34 });
    expect(await runAll()).toEqual([1234]);
    expect((await sk().getJob(job.id))!.result).toBe(1234);
  });

  test('every attempt gets the same value', async () => {
    let runs = 0;
    const flaky = defineTask({
      name: 'flaky-cents',
      payload: z.object({ amount: z.number().transform((n) => Math.round(n * 100)) }),
      backoff: () => 0,
      handler: (p) => {
        seen.push(p.amount);
        if (++runs === 1) throw new Error('once');
        return p.amount;
      },
    });
    const s = createSkiplock({ sql: db.sql, tasks: [flaky], log: quiet });
    await s.enqueue({ task: 'flaky-cents', payload: { amount: 12.34 } });
    seen.length = 0;
    await s.tick({ untilIdle: true });
    await s.tick({ untilIdle: true });
    expect(seen).toEqual([1234, 1234]);
  });

  test('batch, enqueueStatement and debounce', async () => {
    await sk().enqueueBatch([{ task: 'cents', payload: { amount: 12.34 } }, { task: 'cents', payload: { amount: 1 } }]);
    expect((await runAll()).sort()).toEqual([100, 1234]);

    await db.sql.query(sk().enqueueStatement({ task: 'cents', payload: { amount: 12.34 } }));
    expect(await runAll()).toEqual([1234]);

    await sk().enqueue({ task: 'cents', payload: { amount: 12.34 }, debounce: { key: 'k', delayMs: 0 } });
    expect(await runAll()).toEqual([1234]);
  });

  test('ctx.enqueue and ctx.invoke', async () => {
    await sk().enqueue({ task: 'parent', payload: { via: 'enqueue' } });
    expect(await runAll()).toEqual([1234]);

    const invoker = await sk().enqueue({ task: 'parent', payload: { via: 'invoke' } });
    seen.length = 0;
    for (let i = 0; i < 3; i++) await sk().tick({ untilIdle: true });
    expect(seen).toEqual([1234]);
    expect((await sk().getJob(invoker.id))!).toMatchObject({ status: 'DONE', result: 1234 });
  });

  test('static and dynamic schedules', async () => {
    const every = defineSchedule({ name: 'cents-static', every: '1m', catchUp: 'all', task: cents, payload: { amount: 12.34 } });
    let now = new Date('2026-06-01T12:00:30.000Z');
    const s = sk([every], () => now);
    await s.putSchedule('cents-dynamic', { every: '1m', catchUp: 'all', task: 'cents', payload: { amount: 12.34 } });
    await s.tick({ untilIdle: true });
    now = new Date('2026-06-01T12:01:30.000Z');
    expect(await runAll(s)).toEqual([1234, 1234]);
  });

  test('rescheduleJob with a payload', async () => {
    const job = await sk().enqueue({ task: 'cents', payload: { amount: 1 }, delayMs: 60_000 });
    const moved = await sk().rescheduleJob(job.id, { payload: { amount: 12.34 }, delayMs: 0 });
    expect(moved.payload).toEqual({ amount: 12.34 });
    expect(await runAll()).toEqual([1234]);
  });
});

describe('a payload whose JSON form the schema refuses is refused at enqueue', () => {
  const now = new Date('2026-06-01T12:00:00.000Z');

  test('z.date(): invalid_payload on every path, nothing written', async () => {
    const checks: (() => unknown)[] = [
      () => sk().enqueue({ task: 'dated', payload: { at: now } }),
      () => sk().enqueueBatch([{ task: 'cents', payload: { amount: 1 } }, { task: 'dated', payload: { at: now } }]),
      () => sk().enqueueStatement({ task: 'dated', payload: { at: now } }),
      () => sk().enqueue({ task: 'dated', payload: { at: now }, debounce: { key: 'k', delayMs: 0 } }),
      () => sk().putSchedule('dated-dynamic', { every: '1m', task: 'dated', payload: { at: now } }),
    ];
    for (const check of checks) {
      const error = await refused(check);
      expect(error.code).toBe('invalid_payload');
      expect(error.message).toMatch(/JSON/);
      expect(error.issues?.[0]?.path).toContain('at');
    }
    expect(await jobCount()).toBe(0);
    expect((await sk().listSchedules()).schedules).toHaveLength(0);
    expect(() => defineSchedule({ name: 'dated-static', every: '1m', task: dated, payload: { at: now } })).toThrow(/JSON/);
  });

  test('rescheduleJob refuses it too and leaves the job as it was', async () => {
    const job = await sk().enqueue({ task: 'coerced', payload: { at: now.toISOString() }, delayMs: 60_000 });
    // A z.date() task cannot be rescheduled to a Date either; here: a payload the coercing task accepts.
    const bad = await refused(sk().rescheduleJob(job.id, { payload: { at: 'not a date' } }));
    expect(bad.code).toBe('invalid_payload');
    expect((await sk().getJob(job.id))!.payload).toEqual({ at: now.toISOString() });
  });

  test('ctx.invoke of such a payload fails the step with invalid_payload; no child is written', async () => {
    const job = await sk().enqueue({ task: 'parent', payload: { via: 'invoke-date' } });
    await sk().tick({ untilIdle: true });
    expect((await sk().getJob(job.id))!).toMatchObject({ status: 'DONE', result: 'invalid_payload' });
    expect(await jobCount()).toBe(1);
  });

  test('z.coerce.date() works: a Date or its ISO string, a Date in the handler', async () => {
    await sk().enqueue({ task: 'coerced', payload: { at: now } });
    await sk().enqueue({ task: 'coerced', payload: { at: now.toISOString() } });
    const got = await runAll();
    expect(got).toEqual([now, now]);
  });
});
