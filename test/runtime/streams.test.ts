/**
 * Streams, the write side (src/runtime/streams/writer.ts, src/store/streams.ts flushChunks):
 * chunks stored in order, batched (a handful of statements for 100 chunks), flushed at step
 * boundaries and before the job is DONE, never twice across retries and replays, never by a run
 * that lost its lease, and in order under parallel ticks.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'vitest';
import { z } from 'zod';
import { createSkiplock, defineTask, type Task, type TaskContext } from '../../src/index.ts';
import { STREAM_LIMITS } from '../../src/runtime/streams/index.ts';
import { flushChunks } from '../../src/store/streams.ts';
import { statement, type Sql, type Statement } from '../../src/store/sql.ts';
import { createTestDb, type TestDb } from '../support/db.ts';

let db: TestDb;
beforeAll(async () => (db = await createTestDb()));
afterAll(() => db.drop());
beforeEach(() => db.emptyJobs('skiplock.job_stream_chunk'));

const quiet = () => {};
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The chunks stored for a job's stream, in seq order. */
async function stored(jobId: string, name = 'default') {
  return db.sql.query(statement(`SELECT seq, data FROM skiplock.job_stream_chunk WHERE job_id = $1 AND stream = $2 ORDER BY seq`, [jobId, name]));
}
const dataOf = async (jobId: string, name = 'default') => (await stored(jobId, name)).map((r) => r.data);

/** A driver that counts the flush statements it sends. */
function counting(sql: Sql) {
  const counts = { flushes: 0, statements: 0 };
  const seen = (s: Statement) => {
    counts.statements += 1;
    if (s.text.includes('INSERT INTO skiplock.job_stream_chunk')) counts.flushes += 1;
  };
  const wrapped: Sql = {
    query: (s) => (seen(s), sql.query(s)),
    batch: (list) => (list.forEach(seen), sql.batch(list)),
    close: async () => {},
  };
  return { sql: wrapped, counts };
}

function task(name: string, handler: (ctx: TaskContext) => unknown, over: { maxAttempts?: number; timeoutMs?: number } = {}): Task {
  return defineTask({ name, payload: z.object({}).passthrough(), maxAttempts: over.maxAttempts ?? 5, timeoutMs: over.timeoutMs ?? 10_000, backoff: () => 0, handler: (_p, ctx) => handler(ctx) });
}

async function runOne(t: Task, sql: Sql = db.sql, ticks = 1) {
  const skiplock = createSkiplock({ sql, tasks: [t], log: quiet });
  const job = await skiplock.enqueue({ task: t.name, payload: {} } as never);
  for (let i = 0; i < ticks; i++) await skiplock.tick({ untilIdle: true });
  return { skiplock, job: (await skiplock.getJob(job.id))! };
}

describe('ctx.stream: order and batching', () => {
  test('100 chunks written in bursts are stored in order, 1 to 100, by a handful of flushes (not 100)', async () => {
    const counted = counting(db.sql);
    const t = task('hundred', async (ctx) => {
      const out = ctx.stream();
      for (let i = 1; i <= 100; i++) {
        out.write(i % 2 === 0 ? { i } : `chunk ${i}`);
        if (i % 10 === 0) await sleep(2);
      }
      return 'ok';
    });
    const { job } = await runOne(t, counted.sql);
    expect(job.status).toBe('DONE');
    const rows = await stored(job.id);
    expect(rows.map((r) => r.seq)).toEqual(Array.from({ length: 100 }, (_, i) => i + 1));
    expect(rows.map((r) => r.data)).toEqual(Array.from({ length: 100 }, (_, i) => ((i + 1) % 2 === 0 ? { i: i + 1 } : `chunk ${i + 1}`)));
    expect(counted.counts.flushes).toBeGreaterThanOrEqual(1);
    expect(counted.counts.flushes).toBeLessThanOrEqual(5);
  });

  test('a steady writer over a slow database costs a flush per 100 ms, not one per round trip', async () => {
    const counted = counting(db.sql);
    const slow: Sql = { ...counted.sql, query: async (s) => (s.text.includes('job_stream_chunk') ? (await sleep(40), counted.sql.query(s)) : counted.sql.query(s)) };
    let written = 0;
    const t = task('steady', async (ctx) => {
      const out = ctx.stream();
      const started = performance.now();
      while (performance.now() - started < 500) {
        out.write(++written);
        await sleep(2);
      }
      return null;
    });
    const { job } = await runOne(t, slow);
    expect((await stored(job.id)).map((r) => r.seq)).toEqual(Array.from({ length: written }, (_, i) => i + 1));
    // 500 ms of writing: about 500 / (100 + 40) flushes, and the last one; one per 40 ms round trip would be 12 or more.
    expect(counted.counts.flushes).toBeLessThanOrEqual(8);
  });

  test('streams are numbered each on its own; a run that writes nothing sends no flush', async () => {
    const counted = counting(db.sql);
    const t = task('two-streams', (ctx) => {
      const a = ctx.stream('answer');
      const log = ctx.stream('log');
      a.write('a1');
      log.write('l1');
      a.write('a2');
      return null;
    });
    const { job } = await runOne(t, counted.sql);
    expect(await stored(job.id, 'answer')).toEqual([{ seq: 1, data: 'a1' }, { seq: 2, data: 'a2' }]);
    expect(await stored(job.id, 'log')).toEqual([{ seq: 1, data: 'l1' }]);
    expect(counted.counts.flushes).toBe(1);
    const silent = counting(db.sql);
    await runOne(task('silent', () => 'quiet'), silent.sql);
    expect(silent.counts.flushes).toBe(0);
  });

  test('a chunk written inside a step is stored before the step is recorded; every chunk before the job is DONE', async () => {
    const seen: unknown[][] = [];
    let jobId = '';
    const t = task('boundaries', async (ctx) => {
      jobId = ctx.job.id;
      const out = ctx.stream();
      out.write('before');
      await ctx.step('one', () => {
        out.write('inside');
        return 1;
      });
      // Read at once (well within the 100 ms timer): the boundary flushed both.
      seen.push(await dataOf(ctx.job.id));
      out.write('last');
      return 'done';
    });
    const { skiplock, job } = await runOne(t);
    expect(seen).toEqual([['before', 'inside']]);
    expect(job.status).toBe('DONE');
    expect(await skiplock.readStream(jobId)).toMatchObject({ chunks: [{ seq: 1, data: 'before' }, { seq: 2, data: 'inside' }, { seq: 3, data: 'last' }], done: true });
  });

  test('a run that leaves the invocation (a sleep, an event wait) stored its chunks before: the reader sees them while the job waits', async () => {
    const t = task('leaving', async (ctx) => {
      const out = ctx.stream();
      out.write('before the nap');
      await ctx.sleep('nap', 0); // over at once
      out.write('before the wait');
      await ctx.waitForEvent('wait', { event: 'go', timeoutMs: 3_600_000 });
      out.write('after the wait');
      return null;
    });
    const { skiplock, job } = await runOne(t);
    expect(job.status).not.toBe('RUNNING');
    expect(await skiplock.readStream(job.id)).toMatchObject({ chunks: [{ seq: 1, data: 'before the nap' }, { seq: 2, data: 'before the wait' }], done: false });
    await skiplock.sendEvent({ name: 'go' });
    await skiplock.tick({ untilIdle: true });
    expect(await skiplock.readStream(job.id)).toMatchObject({ chunks: [{ data: 'before the nap' }, { data: 'before the wait' }, { seq: 3, data: 'after the wait' }], done: true });
  });

  test('close() flushes now; a write after it is a TypeError', async () => {
    const seen: unknown[][] = [];
    let afterClose: unknown;
    const t = task('closing', async (ctx) => {
      const out = ctx.stream();
      out.write('x');
      await out.close();
      seen.push(await dataOf(ctx.job.id));
      try {
        out.write('y');
      } catch (error) {
        afterClose = error;
      }
      return null;
    });
    const { job } = await runOne(t);
    expect(seen).toEqual([['x']]);
    expect(afterClose).toBeInstanceOf(TypeError);
    expect(await dataOf(job.id)).toEqual(['x']);
  });

  test('the limits: a chunk over 64 KiB is a RangeError and nothing of it is stored; what JSON cannot hold, a TypeError; a bad name too', async () => {
    const errors: unknown[] = [];
    const t = task('limits', (ctx) => {
      const out = ctx.stream();
      for (const bad of ['x'.repeat(STREAM_LIMITS.maxChunkBytes), () => 1, undefined, { s: 'nul\u0000' }, 10n]) {
        try {
          out.write(bad);
        } catch (error) {
          errors.push(error);
        }
      }
      try {
        ctx.stream('no spaces');
      } catch (error) {
        errors.push(error);
      }
      out.write('x'.repeat(STREAM_LIMITS.maxChunkBytes - 2)); // exactly 64 KiB as JSON: accepted
      return null;
    });
    const { job } = await runOne(t);
    expect(errors.map((e) => (e as Error).constructor.name)).toEqual(['RangeError', 'TypeError', 'TypeError', 'TypeError', 'TypeError', 'TypeError']);
    expect(String(errors[0])).toContain('65538 bytes as JSON, more than the 65536 allowed');
    expect((await stored(job.id)).map((r) => (r.data as string).length)).toEqual([STREAM_LIMITS.maxChunkBytes - 2]);
  });
});

describe('ctx.stream: exactly once', () => {
  test('a retried run writes the same places again: no duplicate, the first write wins, new places are added', async () => {
    const t = task('retried', async (ctx) => {
      const out = ctx.stream();
      if (ctx.attempt === 1) {
        out.write('x1');
        out.write('x2');
        await out.close();
        throw new Error('crashed mid-run');
      }
      out.write('y1');
      out.write('y2');
      out.write('y3');
      return 'ok';
    });
    const { skiplock, job } = await runOne(t, db.sql, 2);
    expect(job.status).toBe('DONE');
    expect(await stored(job.id)).toEqual([{ seq: 1, data: 'x1' }, { seq: 2, data: 'x2' }, { seq: 3, data: 'y3' }]);
    expect((await skiplock.readStream(job.id)).chunks.map((c) => c.seq)).toEqual([1, 2, 3]);
  });

  test('a replay past completed steps writes nothing twice, and a chunk after a step does not collide with one inside it', async () => {
    const runs: number[] = [];
    const t = task('replayed', async (ctx) => {
      runs.push(ctx.attempt);
      const out = ctx.stream();
      out.write('before');
      await ctx.step('a', () => {
        out.write('in-a');
        return 1;
      });
      if (ctx.attempt === 1) throw new Error('fails once after step a'); // 'after-a' takes a place of its own on the retry
      out.write('after-a');
      await ctx.step('b', () => {
        out.write(`in-b-${ctx.attempt}`);
        if (ctx.attempt === 2) throw new Error('b fails once');
        return 2;
      });
      out.write('end');
      return 'ok';
    });
    const { job } = await runOne(t, db.sql, 3);
    expect(runs).toEqual([1, 2, 3]);
    expect(job.status).toBe('DONE');
    expect(await stored(job.id)).toEqual(['before', 'in-a', 'after-a', 'in-b-2', 'end'].map((data, i) => ({ seq: i + 1, data })));
  });

  test('a run that crashed after its chunks were flushed (its lease expired, reaped): the next run adds no duplicate', async () => {
    const T0 = new Date('2026-06-01T12:00:00.000Z');
    const state = { dead: false };
    const dying: Sql = {
      query: (s) => (state.dead ? Promise.reject(new Error('the process died')) : db.sql.query(s)),
      batch: (s) => (state.dead ? Promise.reject(new Error('the process died')) : db.sql.batch(s)),
      close: async () => {},
    };
    const t = task('crashing', async (ctx) => {
      const out = ctx.stream();
      out.write('one');
      out.write('two');
      if (ctx.attempt === 1) {
        await out.close();
        state.dead = true; // every statement of this process fails from here: no result is written
        await sleep(50);
        throw new Error('gone');
      }
      out.write('three');
      return 'ok';
    }, { timeoutMs: 1000 });
    const first = createSkiplock({ sql: dying, tasks: [t], now: () => T0, log: quiet });
    const job = await first.enqueue({ task: 'crashing', payload: {} } as never);
    await first.tick({ budgetMs: 2000, marginMs: 500, untilIdle: true, abandonAfterMs: 50, reapIntervalMs: 0 }).catch(() => {});
    expect((await db.sql.query(statement(`SELECT status FROM skiplock.job WHERE id = $1`, [job.id])))[0]!.status).toBe('RUNNING');
    const later = createSkiplock({ sql: db.sql, tasks: [t], now: () => new Date(T0.getTime() + 120_000), log: quiet });
    await later.reap();
    await later.tick({ untilIdle: true, reapIntervalMs: 0 });
    expect((await later.getJob(job.id))!).toMatchObject({ status: 'DONE', attempts: 2 });
    expect(await stored(job.id)).toEqual([{ seq: 1, data: 'one' }, { seq: 2, data: 'two' }, { seq: 3, data: 'three' }]);
  });
});

describe('ctx.stream: the fence', () => {
  test('a flush by a run that lost its lease writes nothing, and stops the run', async () => {
    let aborted = false;
    const t = task('stale', async (ctx) => {
      const out = ctx.stream();
      out.write('mine');
      await ctx.step('flushed', () => 1); // the boundary flushes 'mine'
      // Another worker took the job over (a reaper, then its claim).
      await db.sql.query(statement(`UPDATE skiplock.job SET locked_by = 'someone-else', attempts = attempts + 1 WHERE id = $1`, [ctx.job.id]));
      out.write('stale');
      await out.close();
      aborted = ctx.signal.aborted;
      return 'ignored';
    });
    const { job } = await runOne(t);
    expect(aborted).toBe(true);
    expect(await dataOf(job.id)).toEqual(['mine']);
    expect(job.status).toBe('RUNNING'); // the other worker's: this run wrote no result
  });

  test('the flush statement itself: a wrong locked_by or attempt, or a job not RUNNING, answers held 0 and inserts nothing', async () => {
    const skiplock = createSkiplock({ sql: db.sql, tasks: [task('held', () => null)], log: quiet });
    const job = await skiplock.enqueue({ task: 'held', payload: {} } as never);
    await db.sql.query(statement(`UPDATE skiplock.job SET status = 'RUNNING', locked_by = 'w1', attempts = 1, locked_until = now() + interval '1 minute' WHERE id = $1`, [job.id]));
    const chunks = [{ stream: 'default', segment: 0, ordinal: 1, data: 'c', bytes: 3 }];
    for (const fence of [{ lockedBy: 'w2', attempt: 1 }, { lockedBy: 'w1', attempt: 2 }])
      expect(await db.sql.query(flushChunks({ now: null, jobId: job.id, ...fence, chunks }))).toEqual([{ held: 0, written: 0 }]);
    expect(await db.sql.query(flushChunks({ now: null, jobId: job.id, lockedBy: 'w1', attempt: 1, chunks }))).toEqual([{ held: 1, written: 1 }]);
    expect(await db.sql.query(flushChunks({ now: null, jobId: job.id, lockedBy: 'w1', attempt: 1, chunks }))).toEqual([{ held: 1, written: 0 }]);
    await db.sql.query(statement(`UPDATE skiplock.job SET status = 'DONE', locked_by = NULL, locked_until = NULL, finished_at = now() WHERE id = $1`, [job.id]));
    expect(await db.sql.query(flushChunks({ now: null, jobId: job.id, lockedBy: 'w1', attempt: 1, chunks: [{ ...chunks[0]!, ordinal: 2 }] }))).toEqual([{ held: 0, written: 0 }]);
    expect(await dataOf(job.id)).toEqual(['c']);
  });
});

describe('ctx.stream: parallel ticks', () => {
  test('30 jobs of 40 chunks each, run by 3 ticks at once: every stream is 1…40 in order, nothing twice', async () => {
    const t = task('parallel', async (ctx) => {
      const out = ctx.stream();
      for (let i = 1; i <= 40; i++) {
        out.write(i);
        if (i % 7 === 0) await sleep(Math.floor(Math.random() * 5));
        if (i === 20) await ctx.step('half', () => 'half');
      }
      return 'ok';
    });
    const make = () => createSkiplock({ sql: db.sql, tasks: [t], log: quiet });
    const first = make();
    const jobs = await Promise.all(Array.from({ length: 30 }, () => first.enqueue({ task: 'parallel', payload: {} } as never)));
    await Promise.all([first, make(), make()].map((s) => s.tick({ untilIdle: true, concurrency: 5 })));
    const rows = await db.sql.query(statement(
      `SELECT job_id::text AS job_id, array_agg(seq ORDER BY seq) AS seqs, array_agg((data #>> '{}')::int ORDER BY seq) AS data
         FROM skiplock.job_stream_chunk GROUP BY job_id`));
    expect(rows).toHaveLength(30);
    const expected = Array.from({ length: 40 }, (_, i) => i + 1);
    for (const row of rows) expect({ seqs: row.seqs, data: row.data }).toEqual({ seqs: expected, data: expected });
    expect(new Set(rows.map((r) => r.job_id))).toEqual(new Set(jobs.map((j) => j.id)));
  });

  test('chaos: 20 jobs failing at random points, retried by 3 ticks at once — each stream is exactly 1…30, in order', async () => {
    const t = defineTask({
      name: 'chaos', payload: z.object({}), maxAttempts: 50, backoff: () => 0,
      handler: async (_p, ctx) => {
        const out = ctx.stream();
        for (let i = 1; i <= 30; i++) {
          if (i % 10 === 0) await ctx.step(`s${i}`, () => {
            out.write(i);
            if (Math.random() < 0.3) throw new Error('the step failed');
            return i;
          });
          else out.write(i);
          if (i % 4 === 0) await sleep(Math.floor(Math.random() * 3));
          if (Math.random() < 0.03) throw new Error('crashed between writes');
        }
        return 'ok';
      },
    });
    const make = () => createSkiplock({ sql: db.sql, tasks: [t], log: quiet });
    const first = make();
    const jobs = await Promise.all(Array.from({ length: 20 }, () => first.enqueue({ task: 'chaos', payload: {} })));
    for (let round = 0; round < 30; round++) {
      await Promise.all([first, make(), make()].map((s) => s.tick({ untilIdle: true, concurrency: 4 })));
      const [left] = await db.sql.query(statement(`SELECT count(*)::int AS n FROM skiplock.job WHERE status <> 'DONE'`));
      if (left!.n === 0) break;
    }
    const [retried] = await db.sql.query(statement(`SELECT count(*)::int AS n FROM skiplock.job WHERE attempts > 1`));
    expect(retried!.n).toBeGreaterThan(5); // most jobs failed at least once (each succeeds at once with p ≈ 0.14)
    const expected = Array.from({ length: 30 }, (_, i) => i + 1);
    for (const job of jobs) {
      expect((await first.getJob(job.id))!.status).toBe('DONE');
      expect(await stored(job.id)).toEqual(expected.map((i) => ({ seq: i, data: i })));
    }
  });
});
