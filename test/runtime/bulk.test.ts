/**
 * skiplock.bulk (src/runtime/operations/bulk.ts): the filter, dry runs, each action's fence (a RUNNING job
 * asked to stop, never overwritten; a finished one never cancelled), idempotency, the cancel's
 * cascade inside one chunk, and many DEAD jobs retried by filter while ticks run and single
 * retries race it: none lost, none run twice. BULK_JOBS=100000 for the figure.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'vitest';
import { z } from 'zod';
import { createSkiplock, defineTask } from '../../src/index.ts';
import { statement, type Row, type Sql, type Statement } from '../../src/store/sql.ts';
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
const runs = new Map<string, number>();
const work = defineTask({
  name: 'work',
  payload: z.object({}).passthrough(),
  handler: (_p, ctx) => {
    runs.set(ctx.job.id, (runs.get(ctx.job.id) ?? 0) + 1);
    return 'ok';
  },
});
const other = defineTask({ name: 'other', payload: z.object({}).passthrough(), handler: () => 'ok' });

async function q(text: string, values: unknown[] = []) {
  return db.sql.query(statement(text, values));
}
/** `n` DEAD jobs of `task` with this last error, inserted by one statement. */
async function deadJobs(n: number, task: string, error: string) {
  await q(
    `INSERT INTO skiplock.job (task, status, attempts, max_attempts, last_error, finished_at, flow_key)
     SELECT $1, 'DEAD', 1, 1, $2, now(), 'tenant-' || (g % 2) FROM generate_series(1, $3::int) g`,
    [task, error, n],
  );
}
async function countBy(where: string) {
  return Number((await q(`SELECT count(*)::int AS n FROM skiplock.job WHERE ${where}`))[0]!.n);
}

describe('bulk', () => {
  test('retry by task, status and error: the matching jobs only; twice changes nothing the second time', async () => {
    await deadJobs(30, 'work', 'Error: read ECONNRESET');
    await deadJobs(5, 'work', 'Error: bad input');
    await deadJobs(7, 'other', 'Error: read ECONNRESET');
    const s = createSkiplock({ sql: db.sql, tasks: [work, other], log: quiet });
    const where = { task: 'work', errorContains: 'ECONNRESET' };
    expect(await s.bulk({ action: 'retry', where, dryRun: true })).toEqual({ matched: 30, changed: 0, wouldChange: 30 });
    expect(await countBy(`status = 'QUEUED'`)).toBe(0);
    expect(await s.bulk({ action: 'retry', where: { ...where, status: 'dead' } })).toEqual({ matched: 30, changed: 30 });
    expect(await countBy(`status = 'QUEUED' AND task = 'work' AND attempts = 0`)).toBe(30);
    expect(await s.bulk({ action: 'retry', where })).toEqual({ matched: 30, changed: 0 });
    expect(await s.bulk({ action: 'retry', where: { key: 'tenant-1', task: 'other' } })).toEqual({ matched: 4, changed: 4 });
  });

  test('bad input is refused with nothing written: no filter, an unknown field, fromStep without restart', async () => {
    await deadJobs(3, 'work', 'x');
    const s = createSkiplock({ sql: db.sql, tasks: [work], log: quiet });
    for (const bad of [
      { action: 'retry', where: {} },
      { action: 'retry', where: { task: 'work', nope: 1 } },
      { action: 'explode', where: { task: 'work' } },
      { action: 'retry', where: { task: 'work' }, fromStep: 'a' },
      { action: 'retry', where: { status: 'SLEEPY' } },
    ]) await expect(s.bulk(bad as never)).rejects.toMatchObject({ code: 'invalid_request' });
    expect(await countBy(`status = 'DEAD'`)).toBe(3);
  });

  test('cancel: QUEUED → CANCELLED, a RUNNING job asked to stop once, a finished one left alone; a parent and its child in one chunk', async () => {
    const s = createSkiplock({ sql: db.sql, tasks: [work], log: quiet });
    const queued = await s.enqueue({ task: 'work', payload: {} });
    const running = await s.enqueue({ task: 'work', payload: {} });
    await q(`UPDATE skiplock.job SET status = 'RUNNING', attempts = 1, locked_by = 'w', locked_until = now() + interval '1 hour' WHERE id = $1`, [running.id]);
    await deadJobs(2, 'work', 'x');
    // A WAITING parent with one waiting invoke, its child QUEUED.
    const [parent] = await q(`INSERT INTO skiplock.job (task, status, pending_children, step_count) VALUES ('work', 'WAITING', 1, 1) RETURNING id::text`);
    const [child] = await q(`INSERT INTO skiplock.job (task, parent_id, parent_step) VALUES ('work', $1, 'c') RETURNING id::text`, [parent!.id]);
    await q(`INSERT INTO skiplock.job_step (job_id, id, seq, kind, status, child_id, child_task) VALUES ($1, 'c', 0, 'invoke', 'waiting', $2, 'work')`, [parent!.id, child!.id]);

    expect(await s.bulk({ action: 'cancel', where: { task: 'work' } })).toEqual({ matched: 6, changed: 4 });
    expect((await s.getJob(queued.id))!.status).toBe('CANCELLED');
    expect(await s.getJob(running.id)).toMatchObject({ status: 'RUNNING', cancelRequested: true, lockedBy: 'w' });
    expect((await s.getJob(parent!.id as string))!).toMatchObject({ status: 'CANCELLED', pendingChildren: 0 });
    expect((await s.getJob(child!.id as string))!.status).toBe('CANCELLED');
    expect(await countBy(`status = 'DEAD'`)).toBe(2);
    expect(await s.bulk({ action: 'cancel', where: { task: 'work' } })).toEqual({ matched: 6, changed: 0 });
  });

  test('delete: finished jobs only; restart by filter from a step', async () => {
    const s = createSkiplock({ sql: db.sql, tasks: [work], log: quiet });
    await deadJobs(4, 'work', 'non-deterministic steps: …');
    const live = await s.enqueue({ task: 'work', payload: {} });
    const ids = (await q(`SELECT id::text FROM skiplock.job WHERE status = 'DEAD' ORDER BY id`)).map((r) => String(r.id));
    // Two of them have steps a, b recorded.
    for (const id of ids.slice(0, 2))
      await q(`INSERT INTO skiplock.job_step (job_id, id, seq, kind, status, output) VALUES ($1, 'a', 0, 'step', 'done', '1'), ($1, 'b', 1, 'step', 'done', '2')`, [id]);
    await q(`UPDATE skiplock.job SET step_count = 2 WHERE id = ANY ($1::bigint[])`, [ids.slice(0, 2)]);
    expect(await s.bulk({ action: 'restart', where: { errorContains: 'non-deterministic' }, fromStep: 'b' })).toEqual({ matched: 4, changed: 2 });
    expect((await q(`SELECT job_id::text, id FROM skiplock.job_step ORDER BY job_id, seq`)).map((r) => `${r.job_id}:${r.id}`)).toEqual([`${ids[0]}:a`, `${ids[1]}:a`]);
    expect(await s.bulk({ action: 'delete', where: { task: 'work' } })).toEqual({ matched: 5, changed: 2 });
    expect(await countBy('true')).toBe(3);
    expect((await s.getJob(live.id))!.status).toBe('QUEUED');
  });

  test('many DEAD jobs retried by filter while ticks run and single retries race it: none lost, none run twice', async () => {
    const n = Number(process.env.BULK_JOBS ?? 10_000);
    await deadJobs(n, 'work', 'Error: read ECONNRESET');
    runs.clear();
    // Statements of the bulk action, timed: the longest one bounds the longest lock it holds.
    const sent: { text: string; ms: number }[] = [];
    const timed: Sql = {
      async query(s: Statement) {
        const t = performance.now();
        try { return await db.sql.query(s); } finally { sent.push({ text: s.text, ms: performance.now() - t }); }
      },
      async batch(s: readonly Statement[]) {
        const t = performance.now();
        try { return await db.sql.batch(s); } finally { sent.push({ text: s.map((x) => x.text).join(';'), ms: performance.now() - t }); }
      },
      close: async () => {},
    };
    const bulker = createSkiplock({ sql: timed, tasks: [work], log: quiet });
    const ticker = createSkiplock({ sql: db.sql, tasks: [work], log: quiet, tick: { concurrency: 100 } });
    let stop = false;
    const ticking = (async () => {
      while (!stop) {
        await ticker.tick({ untilIdle: true, budgetMs: 15_000 });
        await new Promise((r) => setTimeout(r, 20));
      }
    })();
    // Single retries of some of the same jobs, at the same time.
    const someIds = (await q(`SELECT id::text FROM skiplock.job ORDER BY random() LIMIT 200`)).map((r) => String(r.id));
    let singles = 0;
    const racing = Promise.all(someIds.map(async (id) => {
      try {
        await ticker.retryJob(id);
        singles += 1;
      } catch (error) {
        expect((error as { code: string }).code).toBe('conflict');
      }
    }));
    const started = performance.now();
    const where = { task: 'work', status: 'DEAD', errorContains: 'ECONNRESET' } as const;
    // The same bulk retry twice at once, and the single retries: each job is retried once.
    const [result, again] = await Promise.all([bulker.bulk({ action: 'retry', where }), ticker.bulk({ action: 'retry', where })]);
    const ms = performance.now() - started;
    await racing;
    // Let the ticks drain the queue.
    const deadline = Date.now() + Math.max(120_000, n * 5);
    while ((await countBy(`status <> 'DONE'`)) > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200));
    stop = true;
    await ticking;
    expect(result.changed + again.changed + singles).toBe(n);
    expect(result.matched).toBeGreaterThanOrEqual(result.changed);
    expect(await countBy(`status = 'DONE'`)).toBe(n);
    expect(runs.size).toBe(n);
    expect([...runs.values()].every((c) => c === 1)).toBe(true);
    const longest = Math.max(...sent.map((s) => s.ms));
    console.log(`bulk retry of ${n} DEAD jobs with ticks running: ${Math.round(ms)} ms, ${sent.length} statements, longest ${Math.round(longest)} ms; changed ${result.changed} + ${again.changed} by a second bulk at once + ${singles} single retries`);
  }, 600_000);
});

/**
 * Issue 30, item 1: the same bulk restart (or restartJob) sent again — a client retrying — must
 * not restart a job the first call restarted, once it has moved on (sleeping, WAITING, queued):
 * its side effects would run again. Item 6: the filter is checked again by the statement that
 * changes a chunk. Item 9: a dry run changes nothing and says so.
 */
describe('bulk and restart sent twice; the filter re-checked at change time; dry runs', () => {
  const HOUR = 3600_000;
  let at = new Date('2026-06-01T12:00:00.000Z');
  let charged = 0;
  let failWith: string | null = null;
  const charge = defineTask({
    name: 'charge',
    payload: z.object({}).passthrough(),
    maxAttempts: 1,
    handler: async (_p, ctx) => {
      await ctx.step('charge', () => (charged += 1));
      if (failWith !== null) throw new Error(failWith);
      await ctx.sleep('wait', HOUR);
      await ctx.step('ship', () => 'shipped');
      return 'done';
    },
  });
  const deploy = (sql: Sql = db.sql) => createSkiplock({ sql, tasks: [charge], log: quiet, now: () => at, retention: false });
  beforeEach(() => {
    at = new Date('2026-06-01T12:00:00.000Z');
    charged = 0;
    failWith = null;
  });
  /** A DEAD job of `charge` that died of a deploy (its error as the step history writes it). */
  async function deadCharge(error = 'non-deterministic steps: step 1 was "wait" (sleep) in an earlier run, and is "fraud-check" (step) now') {
    const [row] = await q(`INSERT INTO skiplock.job (task, status, attempts, max_attempts, last_error, finished_at) VALUES ('charge', 'DEAD', 1, 1, $1, now()) RETURNING id::text`, [error]);
    return String(row!.id);
  }

  test('item 1: the identical bulk restart again after the job ran and slept: {changed: 0}, the side effect not run again', async () => {
    const s = deploy();
    const id = await deadCharge();
    const call = { action: 'restart', where: { task: 'charge', errorContains: 'non-deterministic' } } as const;
    expect(await s.bulk(call)).toEqual({ matched: 1, changed: 1 });
    await s.tick({ untilIdle: true });
    expect(charged).toBe(1);
    // Sleeping: WAITING, due in an hour, still carrying its last error.
    expect(await s.getJob(id)).toMatchObject({ status: 'WAITING', lastError: expect.stringContaining('non-deterministic') });
    // The client retries the same call.
    expect(await s.bulk(call)).toEqual({ matched: 1, changed: 0 });
    expect(await s.bulk({ ...call, dryRun: true })).toMatchObject({ matched: 1, changed: 0, wouldChange: 0 });
    at = new Date(at.getTime() + 2 * HOUR);
    await s.tick({ untilIdle: true });
    expect(await s.getJob(id)).toMatchObject({ status: 'DONE', result: 'done' });
    expect(charged).toBe(1);
    // Retry, cancel and delete sent twice change nothing the second time either.
    expect(await s.bulk({ action: 'delete', where: { task: 'charge' } })).toEqual({ matched: 1, changed: 1 });
    expect(await s.bulk({ action: 'delete', where: { task: 'charge' } })).toEqual({ matched: 0, changed: 0 });
  });

  test('item 1: restartJob on a job already restarted and live is a conflict, nothing re-run; a WAITING or QUEUED job too', async () => {
    const s = deploy();
    const id = await deadCharge();
    expect(await s.restartJob(id)).toMatchObject({ status: 'QUEUED', attempts: 0 });
    await s.tick({ untilIdle: true });
    expect(charged).toBe(1);
    await expect(s.restartJob(id)).rejects.toMatchObject({ code: 'conflict', message: expect.stringMatching(/is WAITING: only a DEAD or CANCELLED job can be restarted/) });
    await expect(s.restartJob(id, { fromStep: 'charge' })).rejects.toMatchObject({ code: 'conflict' });
    expect(await steps(id)).toEqual(['step:charge:done', 'sleep:wait:sleeping']);
    at = new Date(at.getTime() + 2 * HOUR);
    await s.tick({ untilIdle: true });
    expect(charged).toBe(1);
    // A live job is restarted by cancelling it first: two deliberate actions, each idempotent.
    const live = await s.enqueue({ task: 'charge', payload: {} });
    await s.tick({ untilIdle: true });
    await expect(s.restartJob(live.id)).rejects.toMatchObject({ code: 'conflict' });
    await s.cancelJob(live.id);
    expect(await s.restartJob(live.id, { fromStep: 'wait' })).toMatchObject({ status: 'QUEUED', stepCount: 1 });
    await expect(s.restartJob(live.id, { fromStep: 'wait' })).rejects.toMatchObject({ code: 'conflict' });
  });

  /** A Sql that runs `between` once, right after the first chunk's pick and before its change. */
  function pickThen(between: () => Promise<void>): Sql {
    let done = false;
    return {
      async query<R extends Row = Row>(s: Statement) {
        const rows = await db.sql.query<R>(s);
        if (!done && /ORDER BY j\.id LIMIT/.test(s.text)) {
          done = true;
          await between();
        }
        return rows;
      },
      batch: (s: readonly Statement[]) => db.sql.batch(s),
      close: async () => {},
    };
  }

  test('item 6: a person retries a DEAD job between the pick and the change: a {status: DEAD} restart leaves it and its steps alone', async () => {
    const s = deploy();
    const id = await deadCharge();
    await q(`INSERT INTO skiplock.job_step (job_id, id, seq, kind, status, output) VALUES ($1, 'charge', 0, 'step', 'done', '1')`, [id]);
    await q(`UPDATE skiplock.job SET step_count = 1 WHERE id = $1`, [id]);
    const racing = deploy(pickThen(async () => void (await s.retryJob(id))));
    expect(await racing.bulk({ action: 'restart', where: { status: 'DEAD' } })).toEqual({ matched: 1, changed: 0 });
    expect(await steps(id)).toEqual(['step:charge:done']);
    expect(await s.getJob(id)).toMatchObject({ status: 'QUEUED', stepCount: 1 });
  });

  test('item 6, delete {status: DEAD}: retried and run to DONE between the pick and the change → kept', async () => {
    const s = deploy();
    const done = await deadCharge();
    at = new Date(at.getTime() + 2 * HOUR);
    const racing = deploy(pickThen(async () => {
      await s.retryJob(done);
      await s.tick({ untilIdle: true });
      at = new Date(at.getTime() + 2 * HOUR);
      await s.tick({ untilIdle: true });
      expect((await s.getJob(done))!.status).toBe('DONE');
    }));
    expect(await racing.bulk({ action: 'delete', where: { status: 'DEAD' } })).toEqual({ matched: 1, changed: 0 });
    expect((await s.getJob(done))!.status).toBe('DONE');
  });

  test('item 6, restart {errorContains: A}: retried and dead again of error B meanwhile → left DEAD, its steps kept', async () => {
    const s = deploy();
    const other = await deadCharge('Error: A');
    const racing = deploy(pickThen(async () => {
      await s.retryJob(other);
      failWith = 'Error: B';
      await s.tick({ untilIdle: true });
      expect(await s.getJob(other)).toMatchObject({ status: 'DEAD', lastError: expect.stringContaining('Error: B') });
    }));
    expect(await racing.bulk({ action: 'restart', where: { errorContains: 'Error: A' } })).toEqual({ matched: 1, changed: 0 });
    expect(await s.getJob(other)).toMatchObject({ status: 'DEAD' });
    expect(await steps(other)).toEqual(['step:charge:done']);
  });

  test('item 6, retry {status: CANCELLED}: retried by a person and DEAD again meanwhile → left DEAD', async () => {
    const s = deploy();
    const cancelled = await deadCharge('x');
    await q(`UPDATE skiplock.job SET status = 'CANCELLED', last_error = NULL WHERE id = $1`, [cancelled]);
    failWith = 'Error: again';
    const racing = deploy(pickThen(async () => {
      await s.retryJob(cancelled);
      await s.tick({ untilIdle: true });
    }));
    expect(await racing.bulk({ action: 'retry', where: { status: 'cancelled' } })).toEqual({ matched: 1, changed: 0 });
    expect((await s.getJob(cancelled))!.status).toBe('DEAD');
  });

  test('item 6, cancel {status: QUEUED}: WAITING meanwhile (a status the filter leaves out) → not cancelled; its child, still matching, cancelled on its own', async () => {
    const s = deploy();
    const queued = await s.enqueue({ task: 'charge', payload: {}, runAt: new Date(at.getTime() + HOUR).toISOString() });
    const [child] = await q(`INSERT INTO skiplock.job (task, parent_id, parent_step) VALUES ('charge', $1, 'c') RETURNING id::text`, [queued.id]);
    const racing = deploy(pickThen(async () => void (await q(`UPDATE skiplock.job SET status = 'WAITING', pending_children = 1 WHERE id = $1`, [queued.id]))));
    expect(await racing.bulk({ action: 'cancel', where: { status: 'QUEUED', task: 'charge' } })).toEqual({ matched: 2, changed: 1 });
    expect((await s.getJob(queued.id))!.status).toBe('WAITING');
    // The child still matched on its own: cancelled by itself, not as its parent's descendant.
    expect((await s.getJob(String(child!.id)))!.status).toBe('CANCELLED');
  });

  test('item 9: a dry run answers changed 0 and what it would change as wouldChange; a real run has no wouldChange', async () => {
    const s = deploy();
    await deadCharge();
    await deadCharge();
    expect(await s.bulk({ action: 'retry', where: { task: 'charge' }, dryRun: true })).toEqual({ matched: 2, changed: 0, wouldChange: 2 });
    expect(await countBy(`status = 'DEAD'`)).toBe(2);
    expect(await s.bulk({ action: 'retry', where: { task: 'charge' } })).toEqual({ matched: 2, changed: 2 });
  });

  async function steps(jobId: string) {
    return (await q(`SELECT id, kind, status FROM skiplock.job_step WHERE job_id = $1 ORDER BY seq`, [jobId])).map((r) => `${r.kind}:${r.id}:${r.status}`);
  }
});
