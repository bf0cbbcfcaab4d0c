/**
 * How a run's outcome is decided and written: a broken backoff, an odd thrown value or an oversized
 * result never stalls the tick nor blocks the rest of its batch; a cancel asked while a job ran
 * wins over a retry or a release.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'vitest';
import { z } from 'zod';
import { createSkiplock, defineTask } from '../../src/index.ts';
import { MAX_RESULT_BYTES } from '../../src/runtime/tick/run-job.ts';
import { statement } from '../../src/store/sql.ts';
import { createTestDb, type TestDb } from '../support/db.ts';

let db: TestDb;
beforeAll(async () => {
  db = await createTestDb();
});
afterAll(() => db.drop());
beforeEach(async () => {
  await db.emptyJobs();
});

const quiet = () => {};
const T0 = new Date('2026-06-01T12:00:00.000Z');

/** Unhandled rejections during a test: a throw that escaped the tick crashes a Node process. */
function watchUnhandled() {
  const seen: unknown[] = [];
  const onRejection = (reason: unknown) => seen.push(reason);
  process.on('unhandledRejection', onRejection);
  return { seen, stop: () => process.off('unhandledRejection', onRejection) };
}

describe('a backoff that throws or returns a non-number', () => {
  test('a backoff that throws (past the end of its table): the default backoff is used, the tick ends, nothing escapes', async () => {
    const table = [{ ms: 0 }];
    const task = defineTask({
      name: 'table-backoff',
      payload: z.object({}),
      maxAttempts: 5,
      backoff: (n) => table[n - 1]!.ms,
      handler: () => {
        throw new Error('upstream 503');
      },
    });
    const unhandled = watchUnhandled();
    try {
      const skiplock = createSkiplock({ sql: db.sql, tasks: [task], now: () => T0, log: quiet });
      const job = await skiplock.enqueue({ task: 'table-backoff', payload: {} });
      const result = await skiplock.tick({ untilIdle: true, budgetMs: 12_000, marginMs: 500, abandonAfterMs: 100 });
      expect(result).toMatchObject({ claimed: 2, retried: 2 });
      const after = await skiplock.getJob(job.id);
      expect(after).toMatchObject({ status: 'QUEUED', attempts: 2, lockedBy: null });
      // Attempt 2's delay comes from the default backoff: 20 s, jittered down by at most 25 %.
      const delay = after!.runAt.getTime() - T0.getTime();
      expect(delay).toBeGreaterThanOrEqual(15_000);
      expect(delay).toBeLessThanOrEqual(20_000);
      expect(after!.lastError).toMatch(/^Error: upstream 503 \(the task's backoff failed: it threw TypeError: .*; the default backoff was used\)$/);
      await new Promise((resolve) => setTimeout(resolve, 300)); // an abandon timer firing later would throw here
      expect(unhandled.seen).toEqual([]);
    } finally {
      unhandled.stop();
    }
  });

  test.each([
    ['NaN', () => Number.NaN],
    ['undefined', () => undefined as unknown as number],
    ['Infinity', () => Number.POSITIVE_INFINITY],
    ['a string', () => '5000' as unknown as number],
  ])('a backoff returning %s: the default backoff is used, and the rest of the batch still lands', async (_name, backoff) => {
    const bad = defineTask({ name: 'bad-backoff', payload: z.object({}), backoff, handler: () => {
      throw new Error('transient');
    } });
    const good = defineTask({ name: 'good', payload: z.object({}), handler: () => ({ ok: true }) });
    const skiplock = createSkiplock({ sql: db.sql, tasks: [bad, good], now: () => T0, log: quiet });
    const [a, b] = await skiplock.enqueueBatch([{ task: 'bad-backoff' }, { task: 'good' }]);
    const result = await skiplock.tick({ untilIdle: true, budgetMs: 12_000, marginMs: 500 });
    expect(result).toMatchObject({ claimed: 2, retried: 1, done: 1 });
    const failed = await skiplock.getJob(a!.job.id);
    expect(failed).toMatchObject({ status: 'QUEUED', attempts: 1 });
    const delay = failed!.runAt.getTime() - T0.getTime();
    expect(delay).toBeGreaterThanOrEqual(7_500);
    expect(delay).toBeLessThanOrEqual(10_000);
    expect(await skiplock.getJob(b!.job.id)).toMatchObject({ status: 'DONE', result: { ok: true } });
  });

  test('a negative or huge delay is clamped: never before now, never past the cap', async () => {
    const negative = defineTask({ name: 'negative', payload: z.object({}), backoff: () => -5_000, handler: () => {
      throw new Error('x');
    } });
    const huge = defineTask({ name: 'huge', payload: z.object({}), backoff: () => 1e300, handler: () => {
      throw new Error('x');
    } });
    const skiplock = createSkiplock({ sql: db.sql, tasks: [negative, huge], now: () => T0, log: quiet });
    const [a, b] = await skiplock.enqueueBatch([{ task: 'negative', maxAttempts: 1 + 1 }, { task: 'huge' }]);
    // The clamped-to-0 retry runs again in the same tick and dies on its second attempt.
    expect(await skiplock.tick({ untilIdle: true, budgetMs: 12_000, marginMs: 500 })).toMatchObject({ claimed: 3, retried: 2, dead: 1 });
    expect(await skiplock.getJob(a!.job.id)).toMatchObject({ status: 'DEAD', attempts: 2 });
    const later = await skiplock.getJob(b!.job.id);
    expect(later).toMatchObject({ status: 'QUEUED', attempts: 1 });
    expect(later!.runAt.getTime() - T0.getTime()).toBe(365 * 24 * 3600_000);
  });

  test('defineTask refuses an object backoff it cannot use, with a clear error', () => {
    const define = (backoff: unknown) => () => defineTask({ name: 't', payload: z.object({}), handler: () => null, backoff: backoff as never });
    expect(define({ baseMs: Number.NaN })).toThrow(/t: backoff\.baseMs must be a finite number from 0 to/);
    expect(define({ maxMs: -1 })).toThrow(/t: backoff\.maxMs must be a finite number from 0 to/);
    expect(define({ maxMs: Number.POSITIVE_INFINITY })).toThrow(/backoff\.maxMs/);
    expect(define({ jitter: 2 })).toThrow(/t: backoff\.jitter must be a number from 0 to 1/);
    expect(define({ baseMs: '10s' })).toThrow(/backoff\.baseMs/);
    expect(define('exponential')).toThrow(/t: backoff must be a function of the attempt or an object/);
    expect(define({ baseMs: 1_000, maxMs: 60_000, jitter: 0 })).not.toThrow();
    expect(define((n: number) => n * 1_000)).not.toThrow();
  });
});

describe('odd thrown values', () => {
  test.each([
    ['an object without a prototype', () => Object.create(null)],
    ['an object whose toString throws', () => ({ toString() { throw new Error('nope'); } })],
    ['an Error whose name getter throws', () => Object.defineProperty(new Error('m'), 'name', { get() { throw new Error('nope'); } })],
  ])('a handler that throws %s: retried with a readable last_error, the tick ends', async (_name, make) => {
    const task = defineTask({ name: 'odd-throw', payload: z.object({}), backoff: () => 60_000, handler: () => {
      throw make();
    } });
    const unhandled = watchUnhandled();
    try {
      const skiplock = createSkiplock({ sql: db.sql, tasks: [task], log: quiet });
      const job = await skiplock.enqueue({ task: 'odd-throw', payload: {} });
      expect(await skiplock.tick({ untilIdle: true, budgetMs: 12_000, marginMs: 500, abandonAfterMs: 100 })).toMatchObject({ claimed: 1, retried: 1 });
      const after = await skiplock.getJob(job.id);
      expect(after).toMatchObject({ status: 'QUEUED', attempts: 1 });
      expect(after!.lastError).toEqual(expect.any(String));
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(unhandled.seen).toEqual([]);
    } finally {
      unhandled.stop();
    }
  });
});

describe('a result too large for one statement', () => {
  test('is DEAD with a clear error; the rest of its batch lands', async () => {
    const task = defineTask({ name: 'big-result', payload: z.object({ big: z.boolean() }), handler: (p) => (p.big ? { text: 'x'.repeat(MAX_RESULT_BYTES) } : { ok: true }) });
    const skiplock = createSkiplock({ sql: db.sql, tasks: [task], log: quiet });
    const [big, small] = await skiplock.enqueueBatch([{ task: 'big-result', payload: { big: true } }, { task: 'big-result', payload: { big: false } }]);
    expect(await skiplock.tick({ untilIdle: true, budgetMs: 15_000 })).toMatchObject({ claimed: 2, done: 1, dead: 1 });
    expect(await skiplock.getJob(big!.job.id)).toMatchObject({ status: 'DEAD', result: null });
    expect((await skiplock.getJob(big!.job.id))!.lastError).toMatch(/^Error: the handler's result is \d+ bytes as JSON, more than the 1048576 allowed/);
    expect(await skiplock.getJob(small!.job.id)).toMatchObject({ status: 'DONE', result: { ok: true } });
  });

  test('a row the database refuses fails alone: the others of its batch land, and it ends DEAD saying why', async () => {
    // A CHECK this code knows nothing about stands for any row-level refusal (a trigger, a constraint
    // added later): the write is retried row by row, and the refused row is written as DEAD without its result.
    await db.sql.query(statement(`ALTER TABLE skiplock.job_record ADD CONSTRAINT test_no_poison_result CHECK (result IS NULL OR NOT result ? 'poison')`));
    try {
      const task = defineTask({ name: 'poison-result', payload: z.object({ bad: z.boolean() }), handler: (p) => (p.bad ? { poison: true } : { ok: true }) });
      const skiplock = createSkiplock({ sql: db.sql, tasks: [task], log: quiet });
      const jobs = await skiplock.enqueueBatch([true, false, false].map((bad) => ({ task: 'poison-result', payload: { bad } })));
      expect(await skiplock.tick({ untilIdle: true, budgetMs: 15_000, pollIntervalMs: 10 })).toMatchObject({ claimed: 3, done: 2, dead: 1 });
      const bad = await skiplock.getJob(jobs[0]!.job.id);
      expect(bad).toMatchObject({ status: 'DEAD', result: null });
      expect(bad!.lastError).toMatch(/^the result could not be written: .*test_no_poison_result/);
      for (const good of jobs.slice(1)) expect(await skiplock.getJob(good.job.id)).toMatchObject({ status: 'DONE', result: { ok: true } });
    } finally {
      await db.sql.query(statement(`ALTER TABLE skiplock.job_record DROP CONSTRAINT test_no_poison_result`));
    }
  });
});

describe('a cancel asked while the job ran', () => {
  test('wins over a retry: the job ends CANCELLED, not QUEUED again', async () => {
    let skiplock!: ReturnType<typeof createSkiplock>;
    const task = defineTask({ name: 'keeps-failing', payload: z.object({}), backoff: () => 0, handler: async (_p, ctx) => {
      await skiplock.cancelJob(ctx.job.id);
      throw new Error('still failing');
    } });
    skiplock = createSkiplock({ sql: db.sql, tasks: [task], log: quiet });
    const job = await skiplock.enqueue({ task: 'keeps-failing', payload: {} });
    expect(await skiplock.tick({ untilIdle: true, budgetMs: 12_000, marginMs: 500 })).toMatchObject({ claimed: 1, retried: 0, cancelled: 1 });
    const after = await skiplock.getJob(job.id);
    expect(after).toMatchObject({ status: 'CANCELLED', attempts: 1, cancelRequested: false, lockedBy: null, lastError: 'Error: still failing' });
    expect(after!.finishedAt).toBeInstanceOf(Date);
  });

  test('wins over a release at shutdown', async () => {
    let skiplock!: ReturnType<typeof createSkiplock>;
    let started = false;
    const task = defineTask({ name: 'stops-on-signal', payload: z.object({}), timeoutMs: 20_000, handler: async (_p, ctx) => {
      await skiplock.cancelJob(ctx.job.id);
      started = true;
      await new Promise((_resolve, reject) => ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason)));
    } });
    skiplock = createSkiplock({ sql: db.sql, tasks: [task], log: quiet });
    const job = await skiplock.enqueue({ task: 'stops-on-signal', payload: {} });
    const controller = new AbortController();
    const ticking = skiplock.tick({ signal: controller.signal, drainMs: 200, marginMs: 300, leaseMs: 60_000 });
    while (!started) await new Promise((resolve) => setTimeout(resolve, 10));
    controller.abort();
    expect(await ticking).toMatchObject({ claimed: 1, retried: 0, cancelled: 1 });
    expect(await skiplock.getJob(job.id)).toMatchObject({ status: 'CANCELLED', attempts: 1, cancelRequested: false });
  });
});

describe('a claim the database refuses', () => {
  test('with no result to blame, the tick backs off instead of spinning', async () => {
    const task = defineTask({ name: 'any', payload: z.object({}), handler: () => null });
    let claims = 0;
    const sql = {
      ...db.sql,
      async query<R extends Record<string, unknown>>(s: { text: string; values: readonly unknown[] }) {
        if (s.text.includes('claimable_jobs')) {
          claims += 1;
          throw Object.assign(new Error('invalid input syntax'), { code: '22P02' });
        }
        return db.sql.query<R>(s);
      },
    };
    const skiplock = createSkiplock({ sql, tasks: [task], log: quiet });
    await skiplock.enqueue({ task: 'any', payload: {} });
    await skiplock.tick({ budgetMs: 2_000, marginMs: 500, pollIntervalMs: 10 });
    expect(claims).toBeGreaterThan(1);
    expect(claims).toBeLessThan(30); // backed off: 200, 400, 800 ms…
  });
});
