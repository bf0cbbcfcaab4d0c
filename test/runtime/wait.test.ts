/** Waiting for a result: enqueueAndWait and waitForJob, polling the job's row by primary key. */
import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'vitest';
import { z } from 'zod';
import { createSkiplock, defineTask, type Job } from '../../src/index.ts';
import { WAIT_POLL, waitForJob } from '../../src/runtime/tasks/wait-for-job.ts';
import { statement } from '../../src/store/sql.ts';
import { createTestDb, type TestDb } from '../support/db.ts';

let db: TestDb;
beforeAll(async () => (db = await createTestDb()));
afterAll(() => db.drop());
beforeEach(async () => void (await db.emptyJobs()));

const quiet = () => {};
const echo = defineTask({ name: 'echo', payload: z.object({ message: z.string() }), handler: (p) => ({ message: p.message }) });

describe('enqueueAndWait', () => {
  test('a fast job: finished, with its result', async () => {
    const skiplock = createSkiplock({ sql: db.sql, tasks: [echo], log: quiet });
    const { job, created, finished, tick } = await skiplock.enqueueAndWait({ task: 'echo', payload: { message: 'hi' } }, { timeoutMs: 10_000, tick: true });
    expect({ created, finished }).toEqual({ created: true, finished: true });
    expect(job).toMatchObject({ status: 'DONE', result: { message: 'hi' } });
    expect(await tick).toMatchObject({ done: 1 });
  });

  test('a slow job: the wait ends at its bound with the job still running', async () => {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const slow = defineTask({ name: 'slow', payload: z.object({}), handler: () => gate.then(() => 'late') });
    const skiplock = createSkiplock({ sql: db.sql, tasks: [slow], log: quiet });
    const { job, finished, tick } = await skiplock.enqueueAndWait({ task: 'slow', payload: {} }, { timeoutMs: 300, tick: true });
    expect(finished).toBe(false);
    expect(['QUEUED', 'RUNNING']).toContain(job.status);
    release();
    await tick;
    // Waiting again finds it finished.
    expect(await skiplock.waitForJob(job.id, { timeoutMs: 5_000 })).toMatchObject({ finished: true, job: { status: 'DONE', result: 'late' } });
  });

  test('a replay of an idempotency key waits for the original job', async () => {
    const skiplock = createSkiplock({ sql: db.sql, tasks: [echo], log: quiet });
    const first = await skiplock.enqueueAndWait({ task: 'echo', payload: { message: 'once' }, idempotencyKey: 'k1' }, { timeoutMs: 10_000, tick: true });
    await first.tick;
    const replay = await skiplock.enqueueAndWait({ task: 'echo', payload: { message: 'twice' }, idempotencyKey: 'k1' }, { timeoutMs: 10_000 });
    expect(replay).toMatchObject({ created: false, finished: true, job: { id: first.job.id, result: { message: 'once' } } });
  });

  test('a bad timeoutMs is refused before anything is written; an unknown job is undefined', async () => {
    const skiplock = createSkiplock({ sql: db.sql, tasks: [echo], log: quiet });
    for (const timeoutMs of [-1, Number.NaN, Infinity, 24 * 3600 * 1000 + 1, '5' as unknown as number])
      await expect(skiplock.enqueueAndWait({ task: 'echo', payload: { message: 'x' } }, { timeoutMs })).rejects.toMatchObject({ code: 'invalid_request' });
    const [row] = await db.sql.query(statement(`SELECT count(*)::int AS n FROM skiplock.job`));
    expect(row!.n).toBe(0);
    expect(await skiplock.waitForJob('123456', { timeoutMs: 100 })).toBeUndefined();
    expect(await skiplock.waitForJob('not-an-id', { timeoutMs: 100 })).toBeUndefined();
  });
});

describe('waitForJob, on an injected clock', () => {
  const running = { id: '1', status: 'RUNNING' } as Job;

  /**
   * A clock that only sleeps move. A sleep ends after pending reads have answered (on the next
   * macrotask), moving the clock by its length; one aborted first moves nothing.
   */
  function fakeTime() {
    let t = 0;
    const sleeps: number[] = [];
    return {
      sleeps,
      now: () => t,
      elapsed: () => t,
      sleep: (ms: number, signal?: AbortSignal) =>
        new Promise<void>((resolve) => {
          const timer = setImmediate(() => {
            sleeps.push(ms);
            t += ms;
            resolve();
          });
          signal?.addEventListener('abort', () => (clearImmediate(timer), resolve()), { once: true });
        }),
    };
  }

  test('polls with backoff (50 ms, ×1.5, at most 500 ms) and never past its bound', async () => {
    const time = fakeTime();
    let reads = 0;
    const result = await waitForJob(running, 3_000, { read: async () => (reads++, running), elapsed: time.elapsed, sleep: time.sleep });
    expect(result).toEqual({ job: running, finished: false });
    expect(time.now()).toBe(3_000);
    expect(time.sleeps.slice(0, 4)).toEqual([50, 75, 112.5, 168.75]);
    expect(Math.max(...time.sleeps)).toBe(WAIT_POLL.maxMs);
    // A read after every poll but the one that reached the bound.
    expect(reads).toBe(time.sleeps.length - 1);
  });

  test('a read that hangs cannot hold the wait past its bound: the job is answered as last seen', async () => {
    const time = fakeTime();
    const result = await waitForJob(running, 1_000, { read: () => new Promise<Job>(() => {}), elapsed: time.elapsed, sleep: time.sleep });
    expect(result).toEqual({ job: running, finished: false });
    expect(time.now()).toBe(1_000);
  });

  test('a failed read is retried at the next poll', async () => {
    const time = fakeTime();
    const answers: (() => Promise<Job>)[] = [
      () => Promise.reject(new Error('connection reset')),
      async () => ({ ...running, status: 'DONE' }),
    ];
    const result = await waitForJob(running, 10_000, { read: () => answers.shift()!(), elapsed: time.elapsed, sleep: time.sleep });
    expect(result.finished).toBe(true);
    expect(time.now()).toBe(125);
  });

  test('a finished job returns at once, without a read', async () => {
    const done = { ...running, status: 'DONE' } as Job;
    const result = await waitForJob(done, 1_000, { read: () => Promise.reject(new Error('no read expected')) });
    expect(result).toEqual({ job: done, finished: true });
  });
});
