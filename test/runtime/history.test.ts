/** Attempt history and progress: written by the statements that end an attempt, never by one of their own. */
import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'vitest';
import { z } from 'zod';
import { createSkiplock, defineTask } from '../../src/index.ts';
import { MAX_PROGRESS_BYTES } from '../../src/runtime/tick/progress.ts';
import { HISTORY_LIMIT } from '../../src/store/history.ts';
import { statement, type Sql, type Statement } from '../../src/store/sql.ts';
import { createTestDb, type TestDb } from '../support/db.ts';

let db: TestDb;
beforeAll(async () => (db = await createTestDb()));
afterAll(() => db.drop());
beforeEach(async () => void (await db.emptyJobs()));

const quiet = () => {};
const T0 = Date.parse('2026-06-01T12:00:00.000Z');
/** A clock passed into SQL that moves one second per statement, so every attempt has a duration. */
function steppingClock() {
  let t = T0;
  return () => new Date((t += 1000));
}

/** An Sql that counts the statements sent through it. */
function counting(sql: Sql) {
  const sent: Statement[] = [];
  return { sent, sql: { ...sql, query: (s: Statement) => (sent.push(s), sql.query(s)) } as Sql };
}

describe('attempt history', () => {
  test('across retries: each attempt with its number, times, duration, outcome, trimmed error, worker and progress', async () => {
    const task = defineTask({
      name: 'third-time',
      payload: z.object({}),
      backoff: () => 0,
      handler: (_p, ctx) => {
        ctx.progress({ step: ctx.attempt });
        if (ctx.attempt === 1) throw new Error('boom 1');
        if (ctx.attempt === 2) throw new Error('boom 2\n    at handler (/app/tasks.js:10:5)\n    at run (/app/run.js:3:1)');
        return 'ok';
      },
    });
    const skiplock = createSkiplock({ sql: db.sql, tasks: [task], now: steppingClock(), log: quiet });
    const { id } = await skiplock.enqueue({ task: 'third-time', payload: {} });
    await skiplock.tick({ untilIdle: true, workerName: 'w1' });

    const job = (await skiplock.getJob(id))!;
    expect(job).toMatchObject({ status: 'DONE', attempts: 3, progress: { step: 3 } });
    expect(job.history.map((h) => [h.attempt, h.outcome, h.error, h.progress])).toEqual([
      [1, 'retry', 'Error: boom 1', { step: 1 }],
      [2, 'retry', 'Error: boom 2', { step: 2 }],
      [3, 'done', null, { step: 3 }],
    ]);
    for (const h of job.history) {
      expect(h.worker).toMatch(/^w1:/);
      expect(h.startedAt).toBeInstanceOf(Date);
      expect(h.durationMs).toBe(h.endedAt.getTime() - h.startedAt!.getTime());
      expect(h.durationMs).toBeGreaterThan(0);
    }
    // In order, on the clock passed into SQL.
    expect(job.history[1]!.startedAt!.getTime()).toBeGreaterThan(job.history[0]!.endedAt.getTime());
    // last_error keeps the whole text; the history cuts the stack.
    expect(job.lastError).toContain('at handler');
  });

  test('as stored: one JSON object per ended attempt before the last, nine keys; the DONE attempt is read from the row (no entry built per job)', async () => {
    const task = defineTask({ name: 'stored', payload: z.object({}), backoff: () => 0, handler: (_p, ctx) => {
      if (ctx.attempt === 1) throw new Error('first');
    } });
    const skiplock = createSkiplock({ sql: db.sql, tasks: [task], now: steppingClock(), log: quiet });
    const { id } = await skiplock.enqueue({ task: 'stored', payload: {} });
    await skiplock.tick({ untilIdle: true, workerName: 'w1' });
    const [row] = await db.sql.query<{ history: Record<string, unknown>[]; finished_by: string | null }>(
      statement(`SELECT history, finished_by FROM skiplock.job WHERE id = $1`, [id]),
    );
    // Stored: the retry's entry only. The DONE attempt's worker is kept in finished_by.
    expect(row!.history).toHaveLength(1);
    const [e] = row!.history;
    expect(Object.keys(e!).sort()).toEqual(['attempt', 'durationMs', 'endedAt', 'error', 'outcome', 'progress', 'startedAt', 'traceparent', 'worker']);
    expect(e).toMatchObject({ attempt: 1, outcome: 'retry', error: 'Error: first', progress: null, traceparent: null, durationMs: 1000 });
    expect(e!.startedAt).toMatch(/^2026-06-01T12:00:\d\d\+00:00$/);
    expect(e!.worker).toMatch(/^w1:/);
    expect(row!.finished_by).toMatch(/^w1:/);
    // Read: both attempts, the last one from the row's columns.
    const job = (await skiplock.getJob(id))!;
    expect(job.history).toEqual([
      expect.objectContaining({ attempt: 1, outcome: 'retry' }),
      {
        attempt: 2, outcome: 'done', error: null, progress: null, traceparent: null, worker: row!.finished_by,
        startedAt: job.startedAt, endedAt: job.finishedAt, durationMs: job.finishedAt!.getTime() - job.startedAt!.getTime(),
      },
    ]);
  });

  test('a job finished DONE before migration 013 (its entry stored) is read with that entry once', async () => {
    const task = defineTask({ name: 'old-done', payload: z.object({}), handler: () => {} });
    const skiplock = createSkiplock({ sql: db.sql, tasks: [task], now: steppingClock(), log: quiet });
    const { id } = await skiplock.enqueue({ task: 'old-done', payload: {} });
    await skiplock.tick({ untilIdle: true, workerName: 'w1' });
    const before = (await skiplock.getJob(id))!;
    // As the result write before migration 013 left it: the entry in history, no finished_by.
    await db.sql.query(statement(
      `UPDATE skiplock.job SET history = jsonb_build_array(jsonb_build_object('attempt', 1, 'startedAt', started_at, 'endedAt', finished_at,
         'durationMs', 1000, 'outcome', 'done', 'error', NULL, 'worker', 'old:1', 'progress', NULL, 'traceparent', NULL)), finished_by = NULL WHERE id = $1`,
      [id],
    ));
    const after = (await skiplock.getJob(id))!;
    expect(after.history).toEqual([{ ...before.history[0]!, worker: 'old:1' }]);
  });

  test(`bounded: the last ${HISTORY_LIMIT} attempts are kept`, async () => {
    const task = defineTask({ name: 'always-fails', payload: z.object({}), maxAttempts: 25, backoff: () => 0, handler: (_p, ctx) => {
      throw new Error(`failure ${ctx.attempt}`);
    } });
    const skiplock = createSkiplock({ sql: db.sql, tasks: [task], now: steppingClock(), log: quiet });
    const { id } = await skiplock.enqueue({ task: 'always-fails', payload: {} });
    await skiplock.tick({ untilIdle: true });
    const job = (await skiplock.getJob(id))!;
    expect(job).toMatchObject({ status: 'DEAD', attempts: 25 });
    expect(job.history).toHaveLength(HISTORY_LIMIT);
    expect(job.history.map((h) => h.attempt)).toEqual(Array.from({ length: HISTORY_LIMIT }, (_, i) => 25 - HISTORY_LIMIT + 1 + i));
    expect(job.history.at(-1)).toMatchObject({ outcome: 'dead', error: 'Error: failure 25' });
  });

  test('a history longer than the limit (the limit was lowered) is cut to it on the next write', async () => {
    const task = defineTask({ name: 'once', payload: z.object({}), handler: () => 'ok' });
    const skiplock = createSkiplock({ sql: db.sql, tasks: [task], log: quiet });
    const { id } = await skiplock.enqueue({ task: 'once', payload: {} });
    await db.sql.query(statement(
      `UPDATE skiplock.job SET history = (SELECT jsonb_agg(jsonb_build_object('attempt', n, 'endedAt', now(), 'outcome', 'released')) FROM generate_series(1, 25) n) WHERE id = $1`,
      [id],
    ));
    await skiplock.tick({ untilIdle: true });
    const job = (await skiplock.getJob(id))!;
    expect(job.history).toHaveLength(HISTORY_LIMIT);
    expect(job.history[0]!.attempt).toBe(7);
    expect(job.history.at(-1)).toMatchObject({ attempt: 1, outcome: 'done' });
  });

  test('lease lost: the reaper writes the entry; the stale worker adds none; the next attempt follows', async () => {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let started!: () => void;
    const firstRunStarted = new Promise<void>((resolve) => (started = resolve));
    const task = defineTask({ name: 'stalls-once', payload: z.object({}), handler: async (_p, ctx) => {
      if (ctx.attempt === 1) {
        ctx.progress('halfway');
        started();
        await gate;
      }
      return ctx.attempt;
    } });
    const stale = createSkiplock({ sql: db.sql, tasks: [task], log: quiet });
    const { id } = await stale.enqueue({ task: 'stalls-once', payload: {} });
    const staleTick = stale.tick({ untilIdle: true, leaseMs: 600_000, workerName: 'stale' });
    await firstRunStarted;

    const later = createSkiplock({ sql: db.sql, tasks: [task], now: () => new Date(Date.now() + 600_000), log: quiet });
    expect(await later.reap()).toBe(1);
    const reaped = (await later.getJob(id))!;
    expect(reaped.history).toHaveLength(1);
    expect(reaped.history[0]).toMatchObject({ attempt: 1, outcome: 'lease-lost', error: expect.stringMatching(/lease expired on attempt 1/), traceparent: null });
    expect(reaped.history[0]!.worker).toMatch(/^stale:/);
    expect(reaped.history[0]!.durationMs).toBeGreaterThan(500_000);

    expect(await later.tick({ untilIdle: true, workerName: 'new' })).toMatchObject({ done: 1 });
    release();
    expect(await staleTick).toMatchObject({ staleWrites: 1 });
    const job = (await later.getJob(id))!;
    expect(job.history.map((h) => [h.attempt, h.outcome])).toEqual([[1, 'lease-lost'], [2, 'done']]);
    expect(job.history[1]!.worker).toMatch(/^new:/);
  });

  test('released at shutdown: an entry with the attempt given back', async () => {
    let started = false;
    const task = defineTask({ name: 'cooperative', payload: z.object({}), timeoutMs: 20_000, handler: (_p, ctx) =>
      new Promise((_resolve, reject) => {
        started = true;
        ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason));
      }) });
    const skiplock = createSkiplock({ sql: db.sql, tasks: [task], log: quiet });
    const { id } = await skiplock.enqueue({ task: 'cooperative', payload: {} });
    const controller = new AbortController();
    const ticking = skiplock.tick({ signal: controller.signal, drainMs: 100, marginMs: 300, abandonAfterMs: 100 });
    while (!started) await new Promise((r) => setTimeout(r, 10));
    controller.abort();
    await ticking;
    const job = (await skiplock.getJob(id))!;
    expect(job).toMatchObject({ status: 'QUEUED', attempts: 0 });
    expect(job.history).toEqual([expect.objectContaining({ attempt: 1, outcome: 'released', error: 'stopped: the worker shut down' })]);
  });

  test('released unseen: a claim whose answer was lost is given back with an entry', async () => {
    const task = defineTask({ name: 'record', payload: z.object({}), handler: () => 'ok' });
    let lost = false;
    const sql = {
      ...db.sql,
      async query<R extends Record<string, unknown>>(s: Statement) {
        const rows = await db.sql.query<R>(s);
        if (!lost && s.text.includes('claimable_jobs')) {
          lost = true;
          throw new Error('connection terminated: the answer was lost');
        }
        return rows;
      },
    };
    const skiplock = createSkiplock({ sql, tasks: [task], log: quiet });
    const { id } = await skiplock.enqueue({ task: 'record', payload: {} });
    await skiplock.tick({ untilIdle: true, budgetMs: 20_000, pollIntervalMs: 10 });
    // Given back by the tick's next statement (the attempt not spent), then claimed again and run.
    const job = (await skiplock.getJob(id))!;
    expect(job).toMatchObject({ status: 'DONE', attempts: 1 });
    expect(job.history).toEqual([
      expect.objectContaining({ attempt: 1, outcome: 'released', error: expect.stringMatching(/answer was lost/) }),
      expect.objectContaining({ attempt: 1, outcome: 'done' }),
    ]);
  });

  test('cancelled while running', async () => {
    let started = false;
    const task = defineTask({ name: 'cancellable', payload: z.object({}), timeoutMs: 20_000, handler: (_p, ctx) =>
      new Promise((_resolve, reject) => {
        started = true;
        ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason));
      }) });
    const skiplock = createSkiplock({ sql: db.sql, tasks: [task], log: quiet });
    const { id } = await skiplock.enqueue({ task: 'cancellable', payload: {} });
    const ticking = skiplock.tick({ untilIdle: true, leaseMs: 300 });
    while (!started) await new Promise((r) => setTimeout(r, 10));
    await skiplock.cancelJob(id);
    await ticking;
    const job = (await skiplock.getJob(id))!;
    expect(job.status).toBe('CANCELLED');
    expect(job.history).toEqual([expect.objectContaining({ attempt: 1, outcome: 'cancelled' })]);
  });
});

describe('progress', () => {
  test('visible mid-run: written with the heartbeat', async () => {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const task = defineTask({ name: 'reports', payload: z.object({}), handler: async (_p, ctx) => {
      ctx.progress({ done: 1, total: 3 });
      ctx.progress({ done: 2, total: 3 });
      await gate;
      ctx.progress({ done: 3, total: 3 });
      return 'ok';
    } });
    const skiplock = createSkiplock({ sql: db.sql, tasks: [task], log: quiet });
    const { id } = await skiplock.enqueue({ task: 'reports', payload: {} });
    // Heartbeats every leaseMs / 3 = 100 ms.
    const ticking = skiplock.tick({ untilIdle: true, leaseMs: 300 });
    let seen: unknown = null;
    for (let i = 0; i < 200 && seen === null; i += 1) {
      await new Promise((r) => setTimeout(r, 20));
      seen = (await skiplock.getJob(id))!.progress;
    }
    expect(seen).toEqual({ done: 2, total: 3 });
    expect((await skiplock.getJob(id))!.status).toBe('RUNNING');
    release();
    await ticking;
    expect(await skiplock.getJob(id)).toMatchObject({ status: 'DONE', progress: { done: 3, total: 3 } });
  });

  test('costs no round trip: a thousand calls send the same statements as none', async () => {
    const run = async (calls: number) => {
      const task = defineTask({ name: 'chatty', payload: z.object({}), handler: (_p, ctx) => {
        for (let i = 0; i < calls; i += 1) ctx.progress({ i });
      } });
      const { sent, sql } = counting(db.sql);
      const skiplock = createSkiplock({ sql, tasks: [task], log: quiet, retention: false });
      await skiplock.enqueue({ task: 'chatty', payload: {} });
      await skiplock.tick({ untilIdle: true });
      return sent.length;
    };
    expect(await run(1000)).toBe(await run(0));
  });

  test('a value too large or not JSON is refused with a clear error; the job records it', async () => {
    const errors: unknown[] = [];
    const task = defineTask({ name: 'oversized', payload: z.object({}), maxAttempts: 1, handler: (_p, ctx) => {
      for (const bad of ['x'.repeat(MAX_PROGRESS_BYTES), 10n, () => 1, 'nul\u0000']) {
        try {
          ctx.progress(bad);
        } catch (error) {
          errors.push(error);
        }
      }
      ctx.progress({ ok: true });
      ctx.progress('x'.repeat(MAX_PROGRESS_BYTES + 1));
    } });
    const skiplock = createSkiplock({ sql: db.sql, tasks: [task], log: quiet });
    const { id } = await skiplock.enqueue({ task: 'oversized', payload: {} });
    await skiplock.tick({ untilIdle: true });
    expect(errors.map(String)).toEqual([
      expect.stringMatching(/^RangeError: ctx.progress: the value is 2050 bytes of JSON, more than the 2048 allowed/),
      expect.stringMatching(/^TypeError: ctx.progress: the value is not JSON-serializable/),
      expect.stringMatching(/^TypeError: ctx.progress: the value is not JSON/),
      expect.stringMatching(/^TypeError: ctx.progress: the value cannot be stored: a string must not contain the NUL/),
    ]);
    // The uncaught one failed the attempt; the last good value stays.
    expect(await skiplock.getJob(id)).toMatchObject({ status: 'DEAD', progress: { ok: true }, lastError: expect.stringMatching(/RangeError: ctx.progress/) });
  });
});
