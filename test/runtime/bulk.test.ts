/**
 * skiplock.bulk (src/runtime/bulk.ts): the filter, dry runs, each action's fence (a RUNNING job
 * asked to stop, never overwritten; a finished one never cancelled), idempotency, the cancel's
 * cascade inside one chunk, and many DEAD jobs retried by filter while ticks run and single
 * retries race it: none lost, none run twice. BULK_JOBS=100000 for the figure.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'vitest';
import { z } from 'zod';
import { createSkiplock, defineTask } from '../../src/index.ts';
import { statement, type Sql, type Statement } from '../../src/store/sql.ts';
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
    expect(await s.bulk({ action: 'retry', where, dryRun: true })).toEqual({ matched: 30, changed: 30 });
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
