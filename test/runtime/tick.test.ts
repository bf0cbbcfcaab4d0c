import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'vitest';
import { z } from 'zod';
import { createSkiplock, defineTask, PermanentError, type Task } from '../../src/index.ts';
import { statement } from '../../src/store/sql.ts';
import { createTestDb, type TestDb } from '../support/db.ts';

let db: TestDb;
beforeAll(async () => {
  db = await createTestDb();
  await db.sql.query(statement(`CREATE TABLE side_effect (job_id bigint NOT NULL, attempt int NOT NULL, key text NOT NULL)`));
});
afterAll(() => db.drop());
beforeEach(async () => {
  await db.emptyJobs('side_effect');
});

const quiet = () => {};
const T0 = new Date('2026-06-01T12:00:00.000Z');
const at = (ms: number) => new Date(T0.getTime() + ms);

/** A task whose handler records its side effect in a real table. */
function recordingTask(name = 'record'): Task {
  return defineTask({
    name,
    payload: z.object({ n: z.number().int() }),
    handler: async (_payload, ctx) => {
      await db.sql.query(statement(`INSERT INTO side_effect VALUES ($1, $2, $3)`, [ctx.job.id, ctx.attempt, ctx.idempotencyKey]));
      return { ok: true };
    },
  });
}

async function jobRow(id: string) {
  const [row] = await db.sql.query(statement(`SELECT * FROM skiplock.job WHERE id = $1`, [id]));
  return row!;
}

async function count(sqlText: string): Promise<number> {
  const [row] = await db.sql.query(statement(sqlText));
  return Number(row!.n);
}

describe('claiming and completing', () => {
  test('8 concurrent tick loops over 5,000 jobs: each runs exactly once, nothing left RUNNING', async () => {
    const task = recordingTask();
    const producer = createSkiplock({ sql: db.sql, tasks: [task], log: quiet });
    for (let i = 0; i < 5_000; i += 1_000) {
      await producer.enqueueBatch(Array.from({ length: 1_000 }, (_, k) => ({ task: 'record', payload: { n: i + k } })));
    }
    const loops = Array.from({ length: 8 }, (_, i) =>
      createSkiplock({ sql: db.sql, tasks: [task], log: quiet }).tick({ untilIdle: true, concurrency: 25, workerName: `loop${i}` }),
    );
    const results = await Promise.all(loops);

    expect(results.reduce((sum, r) => sum + r.claimed, 0)).toBe(5_000);
    expect(results.reduce((sum, r) => sum + r.done, 0)).toBe(5_000);
    expect(results.reduce((sum, r) => sum + r.staleWrites, 0)).toBe(0);
    expect(results.filter((r) => r.claimed > 0).length).toBeGreaterThan(1);
    expect(await count(`SELECT count(*) n FROM skiplock.job WHERE status = 'DONE'`)).toBe(5_000);
    expect(await count(`SELECT count(*) n FROM skiplock.job WHERE status <> 'DONE'`)).toBe(0);
    expect(await count(`SELECT count(*) n FROM side_effect`)).toBe(5_000);
    expect(await count(`SELECT count(DISTINCT job_id) n FROM side_effect`)).toBe(5_000);
  });

  test('higher priority first, then earlier run_at', async () => {
    const order: number[] = [];
    const task = defineTask({ name: 'order', payload: z.object({ n: z.number() }), handler: (p) => void order.push(p.n) });
    const skiplock = createSkiplock({ sql: db.sql, tasks: [task], now: () => T0, log: quiet });
    await skiplock.enqueue({ task: 'order', payload: { n: 3 }, runAt: at(-1000) });
    await skiplock.enqueue({ task: 'order', payload: { n: 2 }, runAt: at(-2000) });
    await skiplock.enqueue({ task: 'order', payload: { n: 1 }, priority: 5 });
    await skiplock.enqueue({ task: 'order', payload: { n: 9 }, runAt: at(1000) });
    await skiplock.tick({ untilIdle: true, concurrency: 1 });
    expect(order).toEqual([1, 2, 3]);
  });

  test('the handler gets its job, attempt, a stable idempotency key, and can chain jobs', async () => {
    const seen: unknown[] = [];
    const child = defineTask({ name: 'child', payload: z.object({ from: z.string() }), handler: () => 'child done' });
    const parent = defineTask({
      name: 'parent',
      payload: z.object({}),
      maxAttempts: 3,
      backoff: () => 0,
      handler: async (_p, ctx) => {
        seen.push({ attempt: ctx.attempt, key: ctx.idempotencyKey, id: ctx.job.id });
        if (ctx.attempt === 1) throw new Error('transient');
        const next = await ctx.enqueue({ task: 'child', payload: { from: ctx.job.id } });
        return { child: next.id };
      },
    });
    const skiplock = createSkiplock({ sql: db.sql, tasks: [parent, child], log: quiet });
    const job = await skiplock.enqueue({ task: 'parent', payload: {} });
    await skiplock.tick({ untilIdle: true });
    expect(seen).toEqual([
      { attempt: 1, key: `skiplock:${job.id}`, id: job.id },
      { attempt: 2, key: `skiplock:${job.id}`, id: job.id },
    ]);
    const done = await skiplock.getJob(job.id);
    expect(done).toMatchObject({ status: 'DONE', attempts: 2, lastError: 'Error: transient' });
    const childJob = await skiplock.getJob((done!.result as { child: string }).child);
    expect(childJob).toMatchObject({ status: 'DONE', result: 'child done', payload: { from: job.id } });
  });
});

describe('subrequest budget (issue 31, item 5: Workers Free allows 50 per invocation)', () => {
  test('a tick stops claiming while it can still write every claimed job’s result: no statement past the limit, nothing left RUNNING', async () => {
    const task = recordingTask();
    let statements = 0;
    let past = 0;
    const LIMIT = 20;
    const counted = {
      ...db.sql,
      query: (s: Parameters<typeof db.sql.query>[0]) => {
        statements += 1;
        if (statements > LIMIT) past += 1;
        return db.sql.query(s);
      },
    } as typeof db.sql;
    const producer = createSkiplock({ sql: db.sql, tasks: [task], log: quiet });
    await producer.enqueueBatch(Array.from({ length: 200 }, (_, n) => ({ task: 'record', payload: { n } })));
    const skiplock = createSkiplock({ sql: counted, tasks: [task], log: quiet, retention: false });
    const counter = { spent: 0 };
    const result = await skiplock.tick({ untilIdle: true, concurrency: 5, subrequestLimit: LIMIT, subrequestsPerJob: 1, subrequestCounter: counter });
    expect(past).toBe(0);
    expect(counter.spent).toBeGreaterThanOrEqual(statements); // upkeep through skiplock's own port is counted at its most
    expect(result.claimed).toBeGreaterThan(0);
    expect(result.claimed).toBeLessThan(200);
    expect(result.done).toBe(result.claimed);
    expect(await count(`SELECT count(*) n FROM skiplock.job WHERE status = 'RUNNING'`)).toBe(0);
    expect(await count(`SELECT count(*) n FROM skiplock.job WHERE status = 'DONE'`)).toBe(result.claimed);
    // Without a limit the same tick takes them all.
    expect((await skiplock.tick({ untilIdle: true, concurrency: 5 })).claimed).toBe(200 - result.claimed);
  });
});

describe('fenced writes', () => {
  test('a stale worker whose lease was reaped and whose job was reclaimed cannot overwrite the new result', async () => {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let started!: () => void;
    const firstRunStarted = new Promise<void>((resolve) => (started = resolve));
    const task = defineTask({
      name: 'slow-then-fast',
      payload: z.object({}),
      handler: async (_p, ctx) => {
        if (ctx.attempt === 1) {
          started();
          await gate; // stands in for a worker that stalled (GC pause, frozen isolate)
          return { by: 'stale worker' };
        }
        return { by: 'new owner' };
      },
    });
    const warnings: string[] = [];
    const stale = createSkiplock({ sql: db.sql, tasks: [task], log: (_l, message) => warnings.push(message) });
    const job = await stale.enqueue({ task: 'slow-then-fast', payload: {} });
    const staleTick = stale.tick({ untilIdle: true, leaseMs: 600_000 });
    await firstRunStarted;

    // Ten minutes later, by the database's clock passed in: the lease has expired.
    const later = createSkiplock({ sql: db.sql, tasks: [task], now: () => new Date(Date.now() + 600_000), log: quiet });
    expect(await later.reap()).toBe(1);
    expect(await later.tick({ untilIdle: true })).toMatchObject({ claimed: 1, done: 1 });

    release();
    const result = await staleTick;
    expect(result).toMatchObject({ claimed: 1, done: 0, staleWrites: 1 });
    expect(warnings.some((w) => w.includes('stale'))).toBe(true);
    expect(await stale.getJob(job.id)).toMatchObject({ status: 'DONE', attempts: 2, result: { by: 'new owner' } });
  });
});

describe('failures', () => {
  test('a transient error is retried with backoff; run_at honours it', async () => {
    const task = defineTask({
      name: 'fails-once',
      payload: z.object({}),
      backoff: { baseMs: 10_000, jitter: 0.25 },
      handler: (_p, ctx) => {
        if (ctx.attempt === 1) throw new Error('upstream 503');
        return 'ok';
      },
    });
    let now = T0;
    const skiplock = createSkiplock({ sql: db.sql, tasks: [task], now: () => now, log: quiet });
    const job = await skiplock.enqueue({ task: 'fails-once', payload: {} });
    expect(await skiplock.tick({ untilIdle: true })).toMatchObject({ claimed: 1, retried: 1 });
    const retried = await skiplock.getJob(job.id);
    expect(retried).toMatchObject({ status: 'QUEUED', attempts: 1, lastError: 'Error: upstream 503', lockedBy: null });
    const delay = retried!.runAt.getTime() - T0.getTime();
    expect(delay).toBeGreaterThanOrEqual(7_500);
    expect(delay).toBeLessThanOrEqual(10_000);

    now = at(delay - 1);
    expect(await skiplock.tick({ untilIdle: true })).toMatchObject({ claimed: 0 });
    now = at(delay);
    expect(await skiplock.tick({ untilIdle: true })).toMatchObject({ claimed: 1, done: 1 });
    expect(await skiplock.getJob(job.id)).toMatchObject({ status: 'DONE', attempts: 2 });
  });

  test('maxAttempts: DEAD after the last attempt, last_error kept', async () => {
    const task = defineTask({ name: 'always-fails', payload: z.object({}), maxAttempts: 3, backoff: () => 0, handler: () => {
      throw new Error('still broken');
    } });
    const skiplock = createSkiplock({ sql: db.sql, tasks: [task], log: quiet });
    const job = await skiplock.enqueue({ task: 'always-fails', payload: {} });
    const result = await skiplock.tick({ untilIdle: true });
    expect(result).toMatchObject({ claimed: 3, retried: 2, dead: 1 });
    const dead = await skiplock.getJob(job.id);
    expect(dead).toMatchObject({ status: 'DEAD', attempts: 3, maxAttempts: 3, lastError: 'Error: still broken' });
    expect(dead!.finishedAt).toBeInstanceOf(Date);
  });

  test('a permanent error is DEAD on attempt 1', async () => {
    const task = defineTask({ name: 'poison', payload: z.object({}), handler: () => {
      throw new PermanentError('cannot parse invoice');
    } });
    const skiplock = createSkiplock({ sql: db.sql, tasks: [task], log: quiet });
    const job = await skiplock.enqueue({ task: 'poison', payload: {} });
    expect(await skiplock.tick({ untilIdle: true })).toMatchObject({ claimed: 1, dead: 1, retried: 0 });
    expect(await skiplock.getJob(job.id)).toMatchObject({ status: 'DEAD', attempts: 1, lastError: 'PermanentError: cannot parse invoice' });
  });

  test('a payload that no longer validates is DEAD without running', async () => {
    const old = defineTask({ name: 'v1', payload: z.object({ a: z.string() }), handler: () => 'ran' });
    const writer = createSkiplock({ sql: db.sql, tasks: [old], log: quiet });
    const a = await writer.enqueue({ task: 'v1', payload: { a: 'x' } });
    const v2 = defineTask({ name: 'v1', payload: z.object({ a: z.number() }), handler: () => 'ran' });
    const reader = createSkiplock({ sql: db.sql, tasks: [v2], log: quiet });
    expect(await reader.tick({ untilIdle: true })).toMatchObject({ claimed: 1, dead: 1 });
    expect((await reader.getJob(a.id))!.lastError).toMatch(/invalid payload: a:/);
  });

  test('a job of a task this deployment does not have is left for one that has it', async () => {
    const gone = defineTask({ name: 'elsewhere', payload: z.object({}), handler: () => 'ran there' });
    const other = defineTask({ name: 'here', payload: z.object({}), handler: () => 'ran here' });
    const job = await createSkiplock({ sql: db.sql, tasks: [gone], log: quiet }).enqueue({ task: 'elsewhere', payload: {} });
    const partial = createSkiplock({ sql: db.sql, tasks: [other], log: quiet });
    expect(await partial.tick({ untilIdle: true })).toMatchObject({ claimed: 0 });
    expect(await partial.getJob(job.id)).toMatchObject({ status: 'QUEUED', attempts: 0 });
    const full = createSkiplock({ sql: db.sql, tasks: [gone], log: quiet });
    expect(await full.tick({ untilIdle: true })).toMatchObject({ claimed: 1, done: 1 });
  });

  test('a result JSON cannot carry is DEAD with a clear error', async () => {
    const task = defineTask({ name: 'bigint', payload: z.object({}), handler: () => ({ n: 1n }) });
    const skiplock = createSkiplock({ sql: db.sql, tasks: [task], log: quiet });
    const job = await skiplock.enqueue({ task: 'bigint', payload: {} });
    await skiplock.tick({ untilIdle: true });
    expect((await skiplock.getJob(job.id))!.lastError).toMatch(/not JSON-serializable/);
  });
});

describe('what PostgreSQL cannot store', () => {
  test('a result jsonb refuses is DEAD with a clear error, and the rest of its batch still lands', async () => {
    const task = defineTask({ name: 'nul-result', payload: z.object({ bad: z.boolean() }), handler: (p) => (p.bad ? { text: 'a\u0000b', half: '\uD800' } : { ok: true }) });
    const skiplock = createSkiplock({ sql: db.sql, tasks: [task], log: quiet });
    const [bad, good] = await skiplock.enqueueBatch([{ task: 'nul-result', payload: { bad: true } }, { task: 'nul-result', payload: { bad: false } }]);
    expect(await skiplock.tick({ untilIdle: true })).toMatchObject({ claimed: 2, done: 1, dead: 1 });
    expect((await skiplock.getJob(bad!.job.id))!.lastError).toMatch(/result cannot be stored: a string must not contain .* at result\.(text|half)$/);
    expect(await skiplock.getJob(good!.job.id)).toMatchObject({ status: 'DONE', result: { ok: true } });
  });

  test('an error message text refuses is kept readable in last_error', async () => {
    const task = defineTask({ name: 'nul-error', payload: z.object({}), maxAttempts: 1, handler: () => {
      throw new Error('bad byte \u0000 and \uDC00 here');
    } });
    const skiplock = createSkiplock({ sql: db.sql, tasks: [task], log: quiet });
    const job = await skiplock.enqueue({ task: 'nul-error', payload: {} });
    expect(await skiplock.tick({ untilIdle: true })).toMatchObject({ claimed: 1, dead: 1 });
    expect((await skiplock.getJob(job.id))!.lastError).toBe('Error: bad byte \\u0000 and \\udc00 here');
  });
});

describe('deadlines and timeouts', () => {
  test('a hung handler is aborted at its timeout and retried', async () => {
    const reasons: unknown[] = [];
    const task = defineTask({
      name: 'hangs',
      payload: z.object({}),
      timeoutMs: 200,
      handler: (_p, ctx) =>
        new Promise((_resolve, reject) => {
          ctx.signal.addEventListener('abort', () => {
            reasons.push(ctx.signal.reason);
            reject(ctx.signal.reason);
          });
        }),
    });
    const skiplock = createSkiplock({ sql: db.sql, tasks: [task], log: quiet });
    const job = await skiplock.enqueue({ task: 'hangs', payload: {} });
    expect(await skiplock.tick({ untilIdle: true })).toMatchObject({ claimed: 1, retried: 1 });
    expect(reasons).toHaveLength(1);
    expect(await skiplock.getJob(job.id)).toMatchObject({ status: 'QUEUED', attempts: 1, lastError: 'JobStoppedError: timed out after 200 ms' });
  });

  test('a handler that ignores its signal cannot hold the tick past its deadline; its job is retried', async () => {
    const task = defineTask({ name: 'ignores-signal', payload: z.object({}), timeoutMs: 700, handler: () => new Promise(() => {}) });
    const skiplock = createSkiplock({ sql: db.sql, tasks: [task], log: quiet });
    const job = await skiplock.enqueue({ task: 'ignores-signal', payload: {} });
    const started = performance.now();
    const result = await skiplock.tick({ budgetMs: 2_000, marginMs: 500, abandonAfterMs: 100 });
    // A correctness bound, not a speed target: the tick must return by its deadline.
    expect(performance.now() - started).toBeLessThan(2_000 + 1_000); // slack for a loaded machine; the handler never ends
    expect(result).toMatchObject({ claimed: 1, retried: 1 });
    const after = await skiplock.getJob(job.id);
    expect(after).toMatchObject({ status: 'QUEUED', attempts: 1, lockedBy: null });
    expect(after!.lastError).toMatch(/ignored its signal and was abandoned/);
  });

  test('abandonAfterMs longer than marginMs cannot leave the job RUNNING: the abandon comes before the deadline', async () => {
    const task = defineTask({ name: 'ignores-signal', payload: z.object({}), timeoutMs: 1_000, handler: () => new Promise(() => {}) });
    const skiplock = createSkiplock({ sql: db.sql, tasks: [task], log: quiet });
    const job = await skiplock.enqueue({ task: 'ignores-signal', payload: {} });
    // Aborted at its timeout (1 s); abandoned 2 s later would be after the deadline (1.5 s), its result unwritten.
    const result = await skiplock.tick({ budgetMs: 1_500, marginMs: 300, abandonAfterMs: 2_000, pollIntervalMs: 10 });
    expect(result).toMatchObject({ claimed: 1, retried: 1 });
    expect(await skiplock.getJob(job.id)).toMatchObject({ status: 'QUEUED', attempts: 1, lockedBy: null });
  });

  test('a job whose timeout exceeds the remaining budget is not claimed', async () => {
    const task = defineTask({ name: 'long', payload: z.object({}), timeoutMs: 20_000, handler: () => 'ok' });
    const skiplock = createSkiplock({ sql: db.sql, tasks: [task], log: quiet });
    const job = await skiplock.enqueue({ task: 'long', payload: {} });
    expect(await skiplock.tick({ budgetMs: 5_000, untilIdle: true })).toMatchObject({ claimed: 0 });
    expect(await skiplock.getJob(job.id)).toMatchObject({ status: 'QUEUED', attempts: 0 });
    expect(await skiplock.tick({ budgetMs: 25_000, untilIdle: true })).toMatchObject({ claimed: 1, done: 1 });
  });

  test('a task whose timeout can never fit in the budget is named in a warning, once', async () => {
    const warnings: string[] = [];
    const task = defineTask({ name: 'too-long-for-this-tick', payload: z.object({}), timeoutMs: 9_500, handler: () => 'ok' });
    const skiplock = createSkiplock({ sql: db.sql, tasks: [task], log: (_level, message) => warnings.push(message) });
    await skiplock.tick({ budgetMs: 10_000, untilIdle: true });
    await skiplock.tick({ budgetMs: 10_000, untilIdle: true });
    expect(warnings.filter((w) => w.includes('too-long-for-this-tick') && w.includes('not claimed'))).toHaveLength(1);
  });

  test('shutdown: stop claiming, let running jobs drain, release those that stop, retry those that ignore it', async () => {
    const started: string[] = [];
    const cooperative = defineTask({ name: 'cooperative', payload: z.object({}), timeoutMs: 20_000, handler: (_p, ctx) =>
      new Promise((_resolve, reject) => {
        started.push('cooperative');
        ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason));
      }) });
    const stubborn = defineTask({ name: 'stubborn', payload: z.object({}), timeoutMs: 20_000, handler: () => {
      started.push('stubborn');
      return new Promise(() => {});
    } });
    const skiplock = createSkiplock({ sql: db.sql, tasks: [cooperative, stubborn], log: quiet });
    const a = await skiplock.enqueue({ task: 'cooperative', payload: {} });
    const b = await skiplock.enqueue({ task: 'stubborn', payload: {} });
    const controller = new AbortController();
    const ticking = skiplock.tick({ signal: controller.signal, drainMs: 200, marginMs: 300, abandonAfterMs: 100 });
    while (started.length < 2) await new Promise((r) => setTimeout(r, 10));
    controller.abort();
    expect(await ticking).toMatchObject({ claimed: 2, retried: 2 });
    // Released: due again, the attempt given back. Abandoned: the attempt counts.
    expect(await skiplock.getJob(a.id)).toMatchObject({ status: 'QUEUED', attempts: 0, lastError: 'stopped: the worker shut down' });
    expect(await skiplock.getJob(b.id)).toMatchObject({ status: 'QUEUED', attempts: 1 });
  });

  test('a long job keeps its lease by heartbeat; a lost lease aborts the handler and writes nothing', async () => {
    let aborted: unknown;
    const task = defineTask({ name: 'long-running', payload: z.object({}), timeoutMs: 60_000, handler: async (_p, ctx) => {
      expect(await ctx.heartbeat()).toBe(true);
      // Another worker takes the job over (as after a reap and reclaim).
      await db.sql.query(statement(`UPDATE skiplock.job SET locked_by = 'someone-else' WHERE id = $1`, [ctx.job.id]));
      expect(await ctx.heartbeat()).toBe(false);
      aborted = ctx.signal.reason;
      return 'late result';
    } });
    const skiplock = createSkiplock({ sql: db.sql, tasks: [task], log: quiet });
    const job = await skiplock.enqueue({ task: 'long-running', payload: {} });
    expect(await skiplock.tick({ untilIdle: true, budgetMs: 90_000 })).toMatchObject({ claimed: 1, done: 0, staleWrites: 0 });
    expect(String(aborted)).toMatch(/lease was lost/);
    expect(await skiplock.getJob(job.id)).toMatchObject({ status: 'RUNNING', lockedBy: 'someone-else', result: null });
  });
});

describe('warnings said once', () => {
  test('a task no tick can claim is warned about once per skiplock, not once per process', async () => {
    const long = defineTask({ name: 'long', payload: z.object({}), timeoutMs: 60_000, handler: () => null });
    const said: string[][] = [[], []];
    for (const lines of said) {
      const skiplock = createSkiplock({ sql: db.sql, tasks: [long], log: (_level, message) => lines.push(message) });
      await skiplock.tick({ untilIdle: true, budgetMs: 5_000 });
      await skiplock.tick({ untilIdle: true, budgetMs: 5_000 });
    }
    for (const lines of said) expect(lines.filter((m) => m.startsWith('task long has timeoutMs 60000'))).toHaveLength(1);
  });
});

describe('a claim whose answer was lost', () => {
  test('the tick gives the job back (not left RUNNING to be reaped, which spends an attempt: DEAD at maxAttempts 1)', async () => {
    const task = defineTask({ name: 'record', payload: z.object({ n: z.number().int() }), maxAttempts: 1, handler: () => ({ ok: true }) });
    // The driver runs the first claiming statement, then loses its answer (a dropped connection).
    let lost = false;
    const sql = {
      ...db.sql,
      async query<R extends Record<string, unknown>>(s: { text: string; values: readonly unknown[] }) {
        const rows = await db.sql.query<R>(s);
        if (!lost && s.text.includes('claimable_jobs')) {
          lost = true;
          throw new Error('connection terminated: the answer was lost');
        }
        return rows;
      },
    };
    const skiplock = createSkiplock({ sql, tasks: [task], log: quiet });
    const { id } = await skiplock.enqueue({ task: 'record', payload: { n: 1 } });
    const result = await skiplock.tick({ untilIdle: true, budgetMs: 20_000, pollIntervalMs: 10 });
    expect(lost).toBe(true);
    // Given back as soon as the next statement succeeded, then claimed again by the same tick.
    expect(result).toMatchObject({ claimed: 1, done: 1 });
    expect(await jobRow(id)).toMatchObject({ status: 'DONE', attempts: 1, locked_by: null, locked_until: null });
  });
});

describe('reaper', () => {
  test('returns expired leases to QUEUED, or DEAD when attempts are exhausted', async () => {
    const task = recordingTask();
    let now = T0;
    const skiplock = createSkiplock({ sql: db.sql, tasks: [task], now: () => now, log: quiet });
    const [a, b] = await skiplock.enqueueBatch([
      { task: 'record', payload: { n: 1 } },
      { task: 'record', payload: { n: 2 }, maxAttempts: 1 },
    ]);
    // Claimed by a worker that then vanished: simulate the claim with the statement the tick uses.
    await db.sql.query(statement(`UPDATE skiplock.job SET status = 'RUNNING', attempts = 1, locked_by = 'vanished', locked_until = $1`, [at(30_000)]));
    now = at(29_000);
    expect(await skiplock.reap()).toBe(0);
    now = at(31_000);
    expect(await skiplock.reap()).toBe(2);
    expect(await skiplock.getJob(a!.job.id)).toMatchObject({ status: 'QUEUED', attempts: 1, lockedBy: null, runAt: at(31_000) });
    expect(await skiplock.getJob(b!.job.id)).toMatchObject({ status: 'DEAD', attempts: 1 });
    expect((await skiplock.getJob(a!.job.id))!.lastError).toMatch(/lease expired on attempt 1/);
    // And the tick reaps on its own before claiming.
    await db.sql.query(statement(`UPDATE skiplock.job SET status = 'RUNNING', attempts = 1, locked_by = 'vanished', locked_until = $1, finished_at = NULL WHERE id = $2`, [at(0), a!.job.id]));
    expect(await skiplock.tick({ untilIdle: true })).toMatchObject({ reaped: 1, claimed: 1, done: 1 });
  });
});

describe('enqueue', () => {
  // One job alone is a plain INSERT (insertOneJob); with others, the batch statement: each must
  // make one job of a key that concurrent enqueues share, and answer each with it.
  test.each([
    ['alone', 0],
    ['in a batch', 1],
  ])('20 concurrent enqueues with the same idempotency key make one job (the keyed job %s)', async (_, others) => {
    const task = recordingTask();
    const skiplock = createSkiplock({ sql: db.sql, tasks: [task], log: quiet });
    const results = await Promise.all(
      Array.from({ length: 20 }, (_, n) => skiplock.enqueueBatch([
        { task: 'record', payload: { n }, idempotencyKey: 'order-42' },
        ...Array.from({ length: others }, () => ({ task: 'record', payload: { n } })),
      ])),
    );
    const keyed = results.map((batch) => batch[0]!);
    expect(new Set(keyed.map((r) => r.job.id)).size).toBe(1);
    expect(keyed.filter((r) => r.created)).toHaveLength(1);
    expect(await count(`SELECT count(*) n FROM skiplock.job WHERE idempotency_key = 'order-42'`)).toBe(1);
    expect(await count(`SELECT count(*) n FROM skiplock.job`)).toBe(1 + 20 * others);
  });

  test('runAt, delayMs, priority and per-job overrides', async () => {
    const task = recordingTask();
    const skiplock = createSkiplock({ sql: db.sql, tasks: [task], now: () => T0, log: quiet });
    const [a, b] = await skiplock.enqueueBatch([
      { task: 'record', payload: { n: 1 }, delayMs: 5_000, priority: 7, maxAttempts: 2, timeoutMs: 1_234 },
      { task: 'record', payload: { n: 2 }, runAt: '2026-06-02T00:00:00+02:00' },
    ]);
    expect(a!.job).toMatchObject({ runAt: at(5_000), priority: 7, maxAttempts: 2, timeoutMs: 1_234, payload: { n: 1 } });
    expect(b!.job.runAt).toEqual(new Date('2026-06-01T22:00:00Z'));
  });

  test('bad input gets a clear error and writes nothing', async () => {
    const task = recordingTask();
    const skiplock = createSkiplock({ sql: db.sql, tasks: [task], log: quiet });
    await expect(skiplock.enqueue({ task: 'nope', payload: {} })).rejects.toMatchObject({ code: 'unknown_task' });
    await expect(skiplock.enqueue({ task: 'record', payload: { n: 'x' } })).rejects.toMatchObject({
      code: 'invalid_payload',
      issues: [{ path: ['payload', 'n'] }],
    });
    await expect(skiplock.enqueue({ task: 'record', payload: { n: 1 }, delayMs: 1, runAt: new Date() })).rejects.toMatchObject({ code: 'invalid_request' });
    await expect(skiplock.enqueue({ task: 'record', payload: { n: 1 }, priority: 1e9 })).rejects.toMatchObject({ code: 'invalid_request' });
    // Past year 9999 in UTC, a Date prints as +010000-…, which PostgreSQL cannot read.
    await expect(skiplock.enqueue({ task: 'record', payload: { n: 1 }, runAt: '9999-12-31T23:59:59-12:00' })).rejects.toMatchObject({
      code: 'invalid_request',
      issues: [{ path: ['runAt'] }],
    });
    // One bad job in a batch: nothing from the batch is written.
    await expect(
      skiplock.enqueueBatch([{ task: 'record', payload: { n: 1 } }, { task: 'record', payload: {} }]),
    ).rejects.toMatchObject({ code: 'invalid_payload', issues: [{ path: ['jobs', 1, 'payload', 'n'] }] });
    await expect(
      skiplock.enqueueBatch([{ task: 'record', payload: { n: 1 }, idempotencyKey: 'k' }, { task: 'record', payload: { n: 2 }, idempotencyKey: 'k' }]),
    ).rejects.toMatchObject({ code: 'invalid_request' });
    expect(await count(`SELECT count(*) n FROM skiplock.job`)).toBe(0);
  });
});

describe('retention', () => {
  test('prunes DONE and CANCELLED jobs past their age; keeps DEAD until asked', async () => {
    const task = recordingTask();
    let now = T0;
    const skiplock = createSkiplock({ sql: db.sql, tasks: [task], now: () => now, log: quiet });
    const jobs = await skiplock.enqueueBatch([1, 2, 3, 4].map((n) => ({ task: 'record', payload: { n } })));
    const ids = jobs.map((j) => j.job.id);
    await db.sql.query(statement(
      `UPDATE skiplock.job SET status = (ARRAY['DONE','DONE','DEAD','CANCELLED'])[id - $1 + 1], finished_at = $2 WHERE id >= $1`,
      [ids[0], T0],
    ));
    now = at(6 * 24 * 3600_000);
    expect(await skiplock.prune()).toBe(0);
    now = at(8 * 24 * 3600_000);
    expect(await skiplock.prune()).toBe(3);
    expect(await count(`SELECT count(*) n FROM skiplock.job WHERE status = 'DEAD'`)).toBe(1);
    expect(await skiplock.prune({ deadMs: 24 * 3600_000 })).toBe(1);
  });
});

describe('retention runs by itself', () => {
  // Serverless deployments run nothing but ticks: if no tick pruned, finished jobs would pile up
  // for ever (and every count over the table with them).
  const finishedLongAgo = async (skiplock: ReturnType<typeof createSkiplock>, statuses: string[]) => {
    const jobs = await skiplock.enqueueBatch(statuses.map((_, n) => ({ task: 'record', payload: { n } })));
    const ids = jobs.map((j) => j.job.id);
    await db.sql.query(statement(
      `UPDATE skiplock.job SET status = ($3::text[])[id - $1 + 1], attempts = 1, finished_at = $2 WHERE id >= $1`,
      [ids[0], T0, statuses],
    ));
    return ids;
  };

  test('a tick prunes what retention allows (at most once a minute per process); retention: false turns it off', async () => {
    const task = recordingTask();
    let now = at(8 * 24 * 3600_000);
    const skiplock = createSkiplock({ sql: db.sql, tasks: [task], now: () => now, log: quiet, retention: { doneMs: 24 * 3600_000 } });
    await finishedLongAgo(skiplock, ['DONE', 'DONE', 'DEAD', 'CANCELLED']);
    await skiplock.tick({ untilIdle: true, budgetMs: 5_000 });
    expect(await count(`SELECT count(*) n FROM skiplock.job`)).toBe(1); // the DEAD one waits for a person
    // Within the minute, the next tick does not prune again.
    await finishedLongAgo(skiplock, ['DONE']);
    await skiplock.tick({ untilIdle: true, budgetMs: 5_000 });
    expect(await count(`SELECT count(*) n FROM skiplock.job WHERE status = 'DONE'`)).toBe(1);
    expect(await skiplock.prune()).toBe(1);

    const off = createSkiplock({ sql: db.sql, tasks: [task], now: () => now, log: quiet, retention: false });
    await finishedLongAgo(off, ['DONE']);
    await off.tick({ untilIdle: true, budgetMs: 5_000 });
    expect(await count(`SELECT count(*) n FROM skiplock.job WHERE status = 'DONE'`)).toBe(1);
    // prune() still works on demand, with the defaults (7 days).
    expect(await off.prune()).toBe(1);
    now = at(0);
  });
});

describe('schema guards', () => {
  test('CHECK constraints refuse rows that break the state machine', async () => {
    const task = recordingTask();
    const skiplock = createSkiplock({ sql: db.sql, tasks: [task], log: quiet });
    const { id } = await skiplock.enqueue({ task: 'record', payload: { n: 1 } });
    const refused = [
      `UPDATE skiplock.job SET status = 'RUNNING' WHERE id = ${id}`, // no lease
      `UPDATE skiplock.job SET locked_by = 'x', locked_until = now() WHERE id = ${id}`, // lease while QUEUED
      `UPDATE skiplock.job SET status = 'DONE' WHERE id = ${id}`, // finished without finished_at
      `UPDATE skiplock.job SET attempts = max_attempts + 1 WHERE id = ${id}`,
      `UPDATE skiplock.job SET status = 'LOST' WHERE id = ${id}`,
      `UPDATE skiplock.job SET result = '1' WHERE id = ${id}`, // a result before DONE
    ];
    for (const sqlText of refused) await expect(db.sql.query(statement(sqlText)), sqlText).rejects.toMatchObject({ code: '23514' });
  });
});
