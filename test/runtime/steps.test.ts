/**
 * Durable steps (src/runtime/steps/steps.ts): ctx.step runs each step's fn once per success and stores
 * its output; a job of many short steps finishes on short ticks; crashes between steps never run a
 * completed step again, a crash inside one runs only that one again; the limits and the
 * determinism rule give clear errors.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'vitest';
import { z } from 'zod';
import { createSkiplock, defineTask, type Task } from '../../src/index.ts';
import { STEP_LIMITS } from '../../src/runtime/steps/steps.ts';
import { statement, type Sql } from '../../src/store/sql.ts';
import { createTestDb, type TestDb } from '../support/db.ts';

let db: TestDb;
beforeAll(async () => {
  db = await createTestDb();
  await db.sql.query(statement(`CREATE TABLE step_effect (key text PRIMARY KEY, job_id bigint NOT NULL)`));
});
afterAll(() => db.drop());
beforeEach(async () => {
  await db.emptyJobs('step_effect');
});

const quiet = () => {};
const T0 = new Date('2026-06-01T12:00:00.000Z');
const at = (ms: number) => new Date(T0.getTime() + ms);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function rows(text: string, values: unknown[] = []) {
  return db.sql.query(statement(text, values));
}
async function stepRows(jobId: string) {
  return rows(`SELECT id, seq, kind, status, output, error, attempts FROM skiplock.job_step WHERE job_id = $1 ORDER BY seq`, [jobId]);
}

/** A driver that "dies" on demand: every statement fails from then on, as after a crash. */
function crashable(sql: Sql) {
  const state = { dead: false };
  const wrapped: Sql = {
    query: (s) => (state.dead ? Promise.reject(new Error('the process died')) : sql.query(s)),
    batch: (s) => (state.dead ? Promise.reject(new Error('the process died')) : sql.batch(s)),
    close: async () => {},
  };
  return { sql: wrapped, state };
}

/** A task of `n` steps, each recording its keyed side effect and counting its fn calls. */
function stepsTask(o: { n: number; stepMs: number; timeoutMs: number; calls: Map<string, number>; hooks?: { beforeStep?: (i: number) => Promise<void> | void; inStep?: (i: number) => Promise<void> | void }; sql?: () => Sql }): Task {
  return defineTask({
    name: 'many-steps',
    payload: z.object({}),
    timeoutMs: o.timeoutMs,
    maxAttempts: 20,
    backoff: () => 0,
    handler: async (_p, ctx) => {
      let sum = 0;
      for (let i = 0; i < o.n; i++) {
        await o.hooks?.beforeStep?.(i);
        sum += await ctx.step(`step-${i}`, async (s) => {
          o.calls.set(`step-${i}`, (o.calls.get(`step-${i}`) ?? 0) + 1);
          await (o.sql?.() ?? db.sql).query(statement(`INSERT INTO step_effect (key, job_id) VALUES ($1, $2) ON CONFLICT DO NOTHING`, [s.idempotencyKey, ctx.job.id]));
          await o.hooks?.inStep?.(i);
          await sleep(o.stepMs);
          return i;
        });
      }
      return { sum };
    },
  });
}

describe('ctx.step', () => {
  test('a 20-step job of 150 ms steps (timeout 1 s) finishes on ticks of 1.5 s; each step runs and takes effect once', async () => {
    const calls = new Map<string, number>();
    const skiplock = createSkiplock({ sql: db.sql, tasks: [stepsTask({ n: 20, stepMs: 150, timeoutMs: 1000, calls })], log: quiet });
    const job = await skiplock.enqueue({ task: 'many-steps', payload: {} });
    let ticks = 0;
    while ((await skiplock.getJob(job.id))!.status !== 'DONE' && ticks < 20) {
      ticks += 1;
      const started = performance.now();
      await skiplock.tick({ budgetMs: 1500, marginMs: 300, untilIdle: true });
      expect(performance.now() - started).toBeLessThan(1500 + 200);
    }
    const done = (await skiplock.getJob(job.id))!;
    expect(done).toMatchObject({ status: 'DONE', result: { sum: 190 }, stepCount: 20, lastError: null });
    expect(ticks).toBeGreaterThan(2); // it did not fit one tick: it yielded between steps
    // Each yield gave its attempt back: the job never spent more than one.
    expect(done.attempts).toBe(1);
    expect(done.history.filter((h) => h.outcome === 'released').length).toBe(done.history.length - 1);
    expect([...calls.values()]).toEqual(Array(20).fill(1));
    expect((await rows(`SELECT count(*)::int AS n FROM step_effect`))[0]!.n).toBe(20);
    const steps = await stepRows(job.id);
    expect(steps.map((s) => [s.id, s.seq, s.status, s.output, s.attempts])).toEqual(Array.from({ length: 20 }, (_, i) => [`step-${i}`, i, 'done', i, 1]));
  }, 60_000);

  test('a crash between steps never runs a completed step again; a crash inside a step runs only that step again', async () => {
    const calls = new Map<string, number>();
    const crash = crashable(db.sql);
    /** Freezes like a dead process: statements fail, the handler never goes on. */
    const die = async () => {
      crash.state.dead = true;
      await new Promise(() => {});
    };
    let plan: { between?: number; inside?: number } = { between: 3 };
    const hooks = {
      beforeStep: (i: number) => (plan.between === i ? die() : undefined),
      inStep: (i: number) => (plan.inside === i ? die() : undefined),
    };
    const task = stepsTask({ n: 8, stepMs: 1, timeoutMs: 2000, calls, hooks });
    const first = createSkiplock({ sql: crash.sql, tasks: [task], now: () => T0, log: quiet });
    const job = await createSkiplock({ sql: db.sql, tasks: [task], now: () => T0, log: quiet }).enqueue({ task: 'many-steps', payload: {} });

    // Dies before step 3: steps 0-2 are stored, the job is left RUNNING with its lease.
    await first.tick({ budgetMs: 3000, marginMs: 500, untilIdle: true, abandonAfterMs: 50, reapIntervalMs: 0 });
    expect((await skiplock(at(0)).getJob(job.id))!.status).toBe('RUNNING');
    expect((await stepRows(job.id)).map((s) => s.id)).toEqual(['step-0', 'step-1', 'step-2']);

    // The reaper returns it; the next run (a new process) dies inside step 5, after its effect.
    expect(await skiplock(at(60_000)).reap()).toBe(1);
    crash.state.dead = false;
    plan = { inside: 5 };
    await createSkiplock({ sql: crash.sql, tasks: [task], now: () => at(60_000), log: quiet }).tick({ budgetMs: 3000, marginMs: 500, untilIdle: true, abandonAfterMs: 50, reapIntervalMs: 0 });
    expect(await skiplock(at(120_000)).reap()).toBe(1);

    // The last run finishes.
    crash.state.dead = false;
    plan = {};
    await createSkiplock({ sql: db.sql, tasks: [task], now: () => at(120_000), log: quiet }).tick({ untilIdle: true, reapIntervalMs: 0 });
    expect(await skiplock(at(120_000)).getJob(job.id)).toMatchObject({ status: 'DONE', result: { sum: 28 } });
    // Completed steps ran once; the step a crash interrupted ran twice (at-least-once), its keyed effect once.
    expect(Object.fromEntries(calls)).toEqual({ 'step-0': 1, 'step-1': 1, 'step-2': 1, 'step-3': 1, 'step-4': 1, 'step-5': 2, 'step-6': 1, 'step-7': 1 });
    expect((await rows(`SELECT count(*)::int AS n FROM step_effect`))[0]!.n).toBe(8);

    function skiplock(now: Date) {
      return createSkiplock({ sql: db.sql, tasks: [task], now: () => now, log: quiet });
    }
  }, 30_000);

  test('a step that throws is stored as failed and retried with its job; completed steps stay completed', async () => {
    const calls: string[] = [];
    const task = defineTask({
      name: 'flaky',
      payload: z.object({}),
      backoff: () => 60_000,
      handler: async (_p, ctx) => {
        const a = await ctx.step('a', () => (calls.push('a'), { at: new Date('2026-01-01T00:00:00Z') }));
        const b = await ctx.step('b', () => {
          calls.push('b');
          if (ctx.attempt === 1) throw new Error('upstream 503');
          return 'ok';
        });
        return { a, b };
      },
    });
    const skiplock = createSkiplock({ sql: db.sql, tasks: [task], now: () => T0, log: quiet });
    const job = await skiplock.enqueue({ task: 'flaky', payload: {} });
    await skiplock.tick({ untilIdle: true });
    expect(await skiplock.getJob(job.id)).toMatchObject({ status: 'QUEUED', attempts: 1, lastError: 'Error: upstream 503' });
    expect((await stepRows(job.id)).map((s) => [s.id, s.status, s.error, s.attempts])).toEqual([['a', 'done', null, 1], ['b', 'failed', 'Error: upstream 503', 1]]);
    await createSkiplock({ sql: db.sql, tasks: [task], now: () => at(60_000), log: quiet }).tick({ untilIdle: true });
    // A Date comes back as its JSON (a string), on the first run and on every replay alike.
    expect(await skiplock.getJob(job.id)).toMatchObject({ status: 'DONE', attempts: 2, result: { a: { at: '2026-01-01T00:00:00.000Z' }, b: 'ok' } });
    expect(calls).toEqual(['a', 'b', 'b']);
    expect((await stepRows(job.id)).map((s) => [s.id, s.status, s.error, s.attempts])).toEqual([['a', 'done', null, 1], ['b', 'done', null, 2]]);
  });

  test('a step write whose lease was lost writes nothing and stops the run; a step write extends the lease', async () => {
    let after = 0;
    let clock = 0;
    const task = defineTask({
      name: 'usurped',
      payload: z.object({}),
      timeoutMs: 5_000,
      handler: async (_p, ctx) => {
        await ctx.step('a', () => void (clock = 3_000)); // 3 s later on the job's clock
        await ctx.step('b', async () => {
          // Another worker took the job meanwhile (a reclaim after a reap).
          await rows(`UPDATE skiplock.job SET locked_by = 'another-worker', attempts = attempts + 1 WHERE id = $1`, [ctx.job.id]);
        });
        after += 1;
      },
    });
    const skiplock = createSkiplock({ sql: db.sql, tasks: [task], now: () => at(clock), log: quiet });
    const job = await skiplock.enqueue({ task: 'usurped', payload: {} });
    const result = await skiplock.tick({ untilIdle: true, abandonAfterMs: 50, leaseMs: 60_000 });
    expect(result).toMatchObject({ claimed: 1, done: 0, retried: 0, dead: 0 });
    expect(after).toBe(0);
    expect((await stepRows(job.id)).map((s) => s.id)).toEqual(['a']);
    // Step a's write extended the lease (timeout 5 s + 5 s grace) from its own time, 3 s after the claim.
    expect(await skiplock.getJob(job.id)).toMatchObject({ status: 'RUNNING', lockedBy: 'another-worker', lockedUntil: at(13_000), stepCount: 1 });
  });

  test('the step context: a stable idempotency key per step, and the job signal', async () => {
    const seen: unknown[] = [];
    const task = defineTask({
      name: 'keys',
      payload: z.object({}),
      handler: async (_p, ctx) => ctx.step('charge', (s) => void seen.push(s.idempotencyKey, s.signal === ctx.signal)),
    });
    const skiplock = createSkiplock({ sql: db.sql, tasks: [task], now: () => T0, log: quiet });
    const job = await skiplock.enqueue({ task: 'keys', payload: {} });
    await skiplock.tick({ untilIdle: true });
    expect(seen).toEqual([`skiplock:${job.id}:charge`, true]);
  });
});

describe('clear errors', () => {
  async function runToEnd(task: Task) {
    const skiplock = createSkiplock({ sql: db.sql, tasks: [task], now: () => T0, log: quiet });
    const job = await skiplock.enqueue({ task: task.name, payload: {} });
    for (let i = 0; i < 3; i++) await skiplock.tick({ untilIdle: true });
    return (await skiplock.getJob(job.id))!;
  }

  test('a handler that reaches its steps in another order on a later run: DEAD, naming both steps', async () => {
    const task = defineTask({
      name: 'fickle',
      payload: z.object({}),
      backoff: () => 0,
      handler: async (_p, ctx) => {
        await ctx.step('a', () => 1);
        await ctx.step(ctx.attempt === 1 ? 'b' : 'c', () => 2);
        if (ctx.attempt === 1) throw new Error('transient');
      },
    });
    const job = await runToEnd(task);
    expect(job.status).toBe('DEAD');
    expect(job.lastError).toBe('PermanentError: non-deterministic steps: step 1 was "b" (step) in an earlier run, and is "c" (step) now; a handler must reach its steps in the same order on every run');
  });

  test('a recorded step reached at another position: DEAD, even if the handler catches the error', async () => {
    const task = defineTask({
      name: 'swapped',
      payload: z.object({}),
      backoff: () => 0,
      handler: async (_p, ctx) => {
        const order = ctx.attempt === 1 ? ['a', 'b'] : ['b', 'a'];
        for (const id of order) await ctx.step(id, () => id).catch(() => 'caught');
        if (ctx.attempt === 1) throw new Error('transient');
        return 'finished anyway';
      },
    });
    const job = await runToEnd(task);
    expect(job.status).toBe('DEAD');
    expect(job.lastError).toMatch(/non-deterministic steps: "b" was step 1 of an earlier run and is step 0 now \(where "a" was recorded\)/);
  });

  test('the same step id twice in one run: DEAD', async () => {
    const task = defineTask({
      name: 'dup',
      payload: z.object({}),
      handler: async (_p, ctx) => {
        await ctx.step('a', () => 1);
        await ctx.step('a', () => 2);
      },
    });
    const job = await runToEnd(task);
    expect(job).toMatchObject({ status: 'DEAD', attempts: 1 });
    expect(job.lastError).toMatch(/duplicate step id "a"/);
  });

  test('a step output over 256 KiB: DEAD, the step stored as failed; a bad step id: a TypeError, DEAD', async () => {
    const big = defineTask({ name: 'big', payload: z.object({}), handler: async (_p, ctx) => ctx.step('huge', () => 'x'.repeat(STEP_LIMITS.maxOutputBytes)) });
    const job = await runToEnd(big);
    expect(job).toMatchObject({ status: 'DEAD', attempts: 1 });
    expect(job.lastError).toMatch(/the output of step "huge" is 262146 bytes as JSON, more than the 262144 allowed/);
    expect((await stepRows(job.id)).map((s) => [s.id, s.status])).toEqual([['huge', 'failed']]);

    const badId = defineTask({ name: 'bad-id', payload: z.object({}), handler: async (_p, ctx) => ctx.step('', () => 1) });
    expect(await runToEnd(badId)).toMatchObject({ status: 'DEAD', lastError: 'TypeError: ctx.step: the step id must be a string of 1 to 200 characters, got 0 characters' });
  });

  test('more than 4 MiB of step outputs in one job: DEAD', async () => {
    const task = defineTask({
      name: 'hoarder',
      payload: z.object({}),
      handler: async (_p, ctx) => {
        for (let i = 0; i < 20; i++) await ctx.step(`chunk-${i}`, () => 'x'.repeat(250 * 1024));
      },
    });
    const job = await runToEnd(task);
    expect(job.status).toBe('DEAD');
    expect(job.lastError).toMatch(/the outputs of this job's steps would exceed 4194304 bytes of JSON with step "chunk-16"/);
  });

  test('the 4 MiB are counted in bytes of UTF-8, not in characters: non-ASCII outputs count three times', async () => {
    // 80,000 '€' are 240,002 bytes as JSON: under 256 KiB each, and the 18th passes 4 MiB.
    const task = defineTask({
      name: 'euro-hoarder',
      payload: z.object({}),
      handler: async (_p, ctx) => {
        for (let i = 0; i < 20; i++) await ctx.step(`chunk-${i}`, () => '€'.repeat(80_000));
      },
    });
    const job = await runToEnd(task);
    expect(job.status).toBe('DEAD');
    expect(job.lastError).toMatch(/the outputs of this job's steps would exceed 4194304 bytes of JSON with step "chunk-17"/);
  });

  test('more than 10,000 steps in one job: DEAD (recorded steps replay without running)', async () => {
    let ran = 0;
    const task = defineTask({
      name: 'endless',
      payload: z.object({}),
      handler: async (_p, ctx) => {
        for (let i = 0; ; i++) await ctx.step(`s${i}`, () => void (ran += 1));
      },
    });
    const skiplock = createSkiplock({ sql: db.sql, tasks: [task], now: () => T0, log: quiet });
    const job = await skiplock.enqueue({ task: 'endless', payload: {} });
    // 10,000 steps recorded already (as a long history of runs would leave them).
    await rows(`INSERT INTO skiplock.job_step (job_id, id, seq, kind, status, output, attempts) SELECT $1, 's' || g, g, 'step', 'done', 'null', 1 FROM generate_series(0, 9999) g`, [job.id]);
    await rows(`UPDATE skiplock.job SET step_count = 10000 WHERE id = $1`, [job.id]);
    await skiplock.tick({ untilIdle: true });
    const after = (await skiplock.getJob(job.id))!;
    expect(after.status).toBe('DEAD');
    expect(after.lastError).toBe('PermanentError: too many steps: a job may record at most 10000 (ctx.step, ctx.sleep, ctx.invoke)');
    expect(ran).toBe(0);
  });
});
