/**
 * ctx.waitForEvent's edges (src/runtime/steps/event-waits.ts, src/store/events.ts; issue 30): a timed
 * wait takes no event stored at or after its timeout — neither through the send's wake nor
 * through the run's own lookup, both on the database's clock; parallel waits of one job on one
 * name each take their own event, in the order they were called.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'vitest';
import { z } from 'zod';
import { createSkiplock, defineTask } from '../../src/index.ts';
import { statement } from '../../src/store/sql.ts';
import { createTestDb, type TestDb } from '../support/db.ts';

let db: TestDb;
beforeAll(async () => {
  db = await createTestDb();
});
afterAll(() => db.drop());
beforeEach(async () => {
  await db.emptyJobs('skiplock.event');
});

const quiet = () => {};
const T0 = new Date('2026-06-01T12:00:00.000Z');
const at = (ms: number) => new Date(T0.getTime() + ms);
const rows = (text: string, values: unknown[] = []) => db.sql.query<Record<string, any>>(statement(text, values));

describe('a timed wait and an event after its timeout', () => {
  /** The test's clock (ms after T0): every statement of skiplock reads it (invariant 5). */
  let clock = 0;
  /** Set by the test: the handler moves the clock there when it starts (time passing during a run). */
  let jumpTo: number | undefined;
  const timed = defineTask({
    name: 'timed',
    payload: z.object({ key: z.string() }),
    timeoutMs: 2_000,
    handler: async (p, ctx) => {
      if (jumpTo !== undefined) clock = jumpTo;
      return { got: await ctx.waitForEvent('paid', { event: 'order.paid', key: p.key, timeoutMs: 300 }) };
    },
  });
  const make = () => createSkiplock({ sql: db.sql, tasks: [timed], now: () => at(clock), log: quiet, retention: false });

  test('a send 1 s after a 300 ms timeout wakes nothing and the wait returns null', async () => {
    clock = 0;
    jumpTo = undefined;
    const s = make();
    const job = await s.enqueue({ task: 'timed', payload: { key: 'late' } });
    await s.tick({ untilIdle: true });
    expect(await s.getJob(job.id)).toMatchObject({ status: 'WAITING', runAt: at(300) });

    clock = 1_000;
    const sent = await s.sendEvent({ name: 'order.paid', key: 'late', data: { amount: 5 } });
    expect(sent.woken).toBe(0);
    const [step] = await rows(`SELECT status, event_id FROM skiplock.job_step WHERE job_id = $1 AND id = 'paid'`, [job.id]);
    expect(step).toMatchObject({ status: 'waiting', event_id: null });

    await s.tick({ untilIdle: true });
    expect(await s.getJob(job.id)).toMatchObject({ status: 'DONE', result: { got: null } });
  });

  test("the run's own lookup, reached after the timeout, does not take an event stored after it", async () => {
    clock = 0;
    jumpTo = undefined;
    const s = make();
    const job = await s.enqueue({ task: 'timed', payload: { key: 'lookup' } });
    await s.tick({ untilIdle: true });
    // A person's "run now" at 100 ms: the claim reads the wait before its timeout (still waiting).
    clock = 100;
    await s.rescheduleJob(job.id, { delayMs: 0 });
    // An event at 500 ms (after the timeout): stored, taken by no one.
    clock = 500;
    expect((await s.sendEvent({ name: 'order.paid', key: 'lookup', data: 1 })).woken).toBe(0);
    // The run claimed at 100 ms reaches its wait at 1 s: its lookup must answer the timeout.
    clock = 100;
    jumpTo = 1_000;
    await s.tick({ untilIdle: true });
    expect(await s.getJob(job.id)).toMatchObject({ status: 'DONE', result: { got: null } });
  });

  test('an event stored before the timeout is still taken by a run that comes after it', async () => {
    clock = 0;
    jumpTo = undefined;
    const s = make();
    const job = await s.enqueue({ task: 'timed', payload: { key: 'early' } });
    await s.tick({ untilIdle: true });
    clock = 299;
    const sent = await s.sendEvent({ name: 'order.paid', key: 'early', data: 2 });
    expect(sent.woken).toBe(1);
    clock = 5_000;
    await s.tick({ untilIdle: true });
    expect(await s.getJob(job.id)).toMatchObject({ status: 'DONE', result: { got: { data: 2, eventId: sent.id } } });
  });
});

describe('parallel waits of one job on one name', () => {
  const pair = defineTask({
    name: 'pair',
    payload: z.object({ key: z.string() }),
    timeoutMs: 2_000,
    handler: async (p, ctx) => {
      const [a, b] = await Promise.all([
        ctx.waitForEvent('a', { event: 'tick.tock', key: p.key }),
        ctx.waitForEvent('b', { event: 'tick.tock', key: p.key }),
      ]);
      return { a: a?.data, b: b?.data };
    },
  });
  const make = () => createSkiplock({ sql: db.sql, tasks: [pair], log: quiet, retention: false });
  const tickIdle = (s: ReturnType<typeof make>) => s.tick({ untilIdle: true, budgetMs: 5_000, concurrency: 10, pollIntervalMs: 10 });

  test('events sent before the waits: each wait its own, in call order (20 jobs)', async () => {
    const s = make();
    const jobs = await s.enqueueBatch(Array.from({ length: 20 }, (_, i) => ({ task: 'pair' as const, payload: { key: `k${i}` } })));
    await new Promise((resolve) => setTimeout(resolve, 5));
    for (let i = 0; i < 20; i++) {
      await s.sendEvent({ name: 'tick.tock', key: `k${i}`, data: 1 });
      await s.sendEvent({ name: 'tick.tock', key: `k${i}`, data: 2 });
    }
    await tickIdle(s);
    for (const { job } of jobs) expect(await s.getJob(job.id)).toMatchObject({ status: 'DONE', result: { a: 1, b: 2 } });
  });

  test('events sent after the waits: the first goes to the first wait, the second to the second', async () => {
    const s = make();
    const job = await s.enqueue({ task: 'pair', payload: { key: 'after' } });
    await tickIdle(s);
    expect((await s.getJob(job.id))!.status).toBe('WAITING');
    expect(await rows(`SELECT id, status FROM skiplock.job_step WHERE job_id = $1 ORDER BY seq`, [job.id])).toEqual([
      { id: 'a', status: 'waiting' },
      { id: 'b', status: 'waiting' },
    ]);
    expect((await s.sendEvent({ name: 'tick.tock', key: 'after', data: 3 })).woken).toBe(1);
    expect((await s.sendEvent({ name: 'tick.tock', key: 'after', data: 4 })).woken).toBe(1);
    await tickIdle(s);
    expect(await s.getJob(job.id)).toMatchObject({ status: 'DONE', result: { a: 3, b: 4 } });
  });

  test('a wait for ever and a timed one in parallel: both recorded, the job WAITING with the timeout as its runAt (not for ever)', async () => {
    const either = defineTask({
      name: 'either',
      payload: z.object({}),
      timeoutMs: 2_000,
      handler: async (_p, ctx) => {
        const [a, b] = await Promise.all([
          ctx.waitForEvent('forever', { event: 'tick.tock', key: 'never' }),
          ctx.waitForEvent('timed', { event: 'tick.tock', key: 'late', timeoutMs: 300 }),
        ]);
        return { a, b };
      },
    });
    let clock = 0;
    const s = createSkiplock({ sql: db.sql, tasks: [either], now: () => at(clock), log: quiet, retention: false });
    const job = await s.enqueue({ task: 'either', payload: {} });
    await s.tick({ untilIdle: true });
    expect(await s.getJob(job.id)).toMatchObject({ status: 'WAITING', runAt: at(300) });
    expect((await rows(`SELECT id, status FROM skiplock.job_step WHERE job_id = $1 ORDER BY seq`, [job.id])).map((r) => r.id)).toEqual(['forever', 'timed']);
    clock = 400;
    await s.tick({ untilIdle: true });
    // The timed wait ended (null); the other still waits, for ever now.
    expect(await s.getJob(job.id)).toMatchObject({ status: 'WAITING' });
    expect((await s.sendEvent({ name: 'tick.tock', key: 'never', data: 9 })).woken).toBe(1);
    await s.tick({ untilIdle: true });
    expect(await s.getJob(job.id)).toMatchObject({ status: 'DONE', result: { a: { data: 9 }, b: null } });
  });

  test('one event before and one after: the first wait takes the first', async () => {
    const s = make();
    const job = await s.enqueue({ task: 'pair', payload: { key: 'mixed' } });
    await new Promise((resolve) => setTimeout(resolve, 5));
    await s.sendEvent({ name: 'tick.tock', key: 'mixed', data: 5 });
    await tickIdle(s);
    expect((await s.getJob(job.id))!.status).toBe('WAITING');
    expect((await s.sendEvent({ name: 'tick.tock', key: 'mixed', data: 6 })).woken).toBe(1);
    await tickIdle(s);
    expect(await s.getJob(job.id)).toMatchObject({ status: 'DONE', result: { a: 5, b: 6 } });
  });
});

describe("events and callbacks count toward a job's 4 MiB of outputs", () => {
  const KIB = 1024;
  /** 16 steps of 250 KiB: 4,096,032 bytes of JSON, under the job's 4,194,304. */
  const fill = async (ctx: { step: (id: string, fn: () => string) => Promise<string> }) => {
    for (let i = 0; i < 16; i++) await ctx.step(`fill-${i}`, () => 'x'.repeat(250 * KIB));
  };
  const secret = { secret: 'a-callback-secret-of-some-length', publicUrl: 'https://jobs.example.com' };
  const urls: string[] = [];
  const tasks = [
    defineTask({
      name: 'fill-then-event',
      payload: z.object({}),
      timeoutMs: 10_000,
      handler: async (_p, ctx) => {
        await fill(ctx);
        return (await ctx.waitForEvent('big', { event: 'big.data', key: ctx.job.id }))?.eventId;
      },
    }),
    defineTask({
      name: 'event-then-fill',
      payload: z.object({}),
      timeoutMs: 10_000,
      handler: async (_p, ctx) => {
        await ctx.waitForEvent('big', { event: 'big.data', key: ctx.job.id });
        await fill(ctx);
        return 'filled';
      },
    }),
    defineTask({
      name: 'fill-then-callback',
      payload: z.object({}),
      timeoutMs: 10_000,
      handler: async (_p, ctx) => {
        await fill(ctx);
        urls.push((await ctx.createCallback('answer')).url);
        return (await ctx.waitForCallback('answer')) === null ? 'timed out' : 'answered';
      },
    }),
    defineTask({
      name: 'small',
      payload: z.object({}),
      timeoutMs: 10_000,
      handler: async (_p, ctx) => {
        urls.push((await ctx.createCallback('answer')).url);
        return ctx.waitForCallback('answer');
      },
    }),
  ];
  const make = () => createSkiplock({ sql: db.sql, tasks, log: quiet, retention: false, callbacks: secret });
  const tickIdle = (s: ReturnType<typeof make>) => s.tick({ untilIdle: true, budgetMs: 20_000, pollIntervalMs: 10 });
  const bigData = { blob: 'y'.repeat(200 * KIB) };

  test('an event taken by a wait past the total: the wait throws a PermanentError, the job is DEAD', async () => {
    const s = make();
    const job = await s.enqueue({ task: 'fill-then-event', payload: {} });
    await tickIdle(s);
    expect((await s.getJob(job.id))!.status).toBe('WAITING');
    expect((await s.sendEvent({ name: 'big.data', key: job.id, data: bigData })).woken).toBe(1);
    await tickIdle(s);
    const dead = (await s.getJob(job.id))!;
    expect(dead.status).toBe('DEAD');
    expect(dead.lastError).toMatch(/PermanentError: .*would exceed 4194304 bytes of JSON with the event wait "big" took/);
    // A person's retry reads the same recorded steps and ends the same way.
    await s.retryJob(job.id);
    await tickIdle(s);
    expect(await s.getJob(job.id)).toMatchObject({ status: 'DEAD', lastError: dead.lastError });

    // The event already stored when the wait is reached (taken by the wait's own statement): the same.
    const early = await s.enqueue({ task: 'fill-then-event', payload: {} });
    await new Promise((resolve) => setTimeout(resolve, 5));
    await s.sendEvent({ name: 'big.data', key: early.id, data: bigData });
    await tickIdle(s);
    expect(await s.getJob(early.id)).toMatchObject({ status: 'DEAD', lastError: dead.lastError });
  });

  test("an event's data counts for the steps after it", async () => {
    const s = make();
    const job = await s.enqueue({ task: 'event-then-fill', payload: {} });
    await new Promise((resolve) => setTimeout(resolve, 5));
    await s.sendEvent({ name: 'big.data', key: job.id, data: bigData });
    await tickIdle(s);
    const dead = (await s.getJob(job.id))!;
    expect(dead.status).toBe('DEAD');
    expect(dead.lastError).toMatch(/would exceed 4194304 bytes of JSON with step "fill-15"/);
  });

  test('callback data past the total: the wait throws, the job is DEAD', async () => {
    urls.length = 0;
    const s = make();
    const job = await s.enqueue({ task: 'fill-then-callback', payload: {} });
    await tickIdle(s);
    expect(await s.completeCallback(urls[0]!.split('/').pop()!, bigData)).toBe('completed');
    await tickIdle(s);
    const dead = (await s.getJob(job.id))!;
    expect(dead.status).toBe('DEAD');
    expect(dead.lastError).toMatch(/would exceed 4194304 bytes of JSON with the callback "answer"/);
  });

  test('callback data over 256 KiB is refused (payload_too_large) and writes nothing; the wait stays open', async () => {
    urls.length = 0;
    const s = make();
    const job = await s.enqueue({ task: 'small', payload: {} });
    await tickIdle(s);
    const token = urls[0]!.split('/').pop()!;
    await expect(s.completeCallback(token, { blob: 'z'.repeat(900 * KIB) })).rejects.toMatchObject({ code: 'payload_too_large' });
    expect(await rows(`SELECT status, output FROM skiplock.job_step WHERE job_id = $1`, [job.id])).toEqual([{ status: 'waiting', output: null }]);
    expect((await s.getJob(job.id))!.status).toBe('WAITING');
    expect(await s.completeCallback(token, { ok: true })).toBe('completed');
    await tickIdle(s);
    expect(await s.getJob(job.id)).toMatchObject({ status: 'DONE', result: { data: { ok: true } } });
  });
});
