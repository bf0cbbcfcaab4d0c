/**
 * What a tick holds and gives back: lost claims are returned as soon as a statement succeeds
 * (and nothing more is claimed until then), the tick remembers only what it still holds, and a
 * run is told apart from a later run of the same job (the same id, even the same attempt number).
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
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const isClaim = (s: Statement) => s.text.includes('claimable_jobs');
const isRelease = (s: Statement) => s.text.includes('NOT (j.id = ANY');
const isHeartbeat = (s: Statement) => s.text.includes('greatest(j.locked_until');

/** A driver that runs every statement and lets the test lose answers or delay them. */
function wrapDriver(hooks: { after?: (s: Statement, n: number) => void; before?: (s: Statement) => Promise<unknown> | void }) {
  const log: { kind: string; ok: boolean; values: readonly unknown[] }[] = [];
  let n = 0;
  const sql: Sql = {
    ...db.sql,
    async query<R extends Record<string, unknown>>(s: Statement) {
      await hooks.before?.(s);
      const kind = isClaim(s) ? 'claim' : isRelease(s) ? 'release' : isHeartbeat(s) ? 'heartbeat' : 'other';
      const rows = await db.sql.query<R>(s);
      try {
        hooks.after?.(s, (n += 1));
      } catch (error) {
        log.push({ kind, ok: false, values: s.values });
        throw error;
      }
      log.push({ kind, ok: true, values: s.values });
      return rows;
    },
  };
  return { sql, log };
}

async function waitFor(check: () => Promise<boolean>, ms: number): Promise<boolean> {
  const until = performance.now() + ms;
  while (performance.now() < until) {
    if (await check()) return true;
    await sleep(20);
  }
  return false;
}

describe('a claim whose answer was lost', () => {
  test('its jobs are given back as soon as the next statement succeeds, not when the tick ends; nothing is claimed before that', async () => {
    const task = defineTask({ name: 'quick', payload: z.object({}), maxAttempts: 1, handler: () => 'ok' });
    let lost = 0;
    let releaseFailures = 0;
    const { sql, log } = wrapDriver({
      after: (s) => {
        if (lost === 0 && isClaim(s)) {
          lost += 1;
          throw new Error('connection terminated: the answer was lost');
        }
        // The next statement after the loss fails too: still nothing may be claimed meanwhile.
        if (lost === 1 && isRelease(s) && releaseFailures === 0) {
          releaseFailures += 1;
          throw new Error('connection terminated again');
        }
      },
    });
    const skiplock = createSkiplock({ sql, tasks: [task], log: quiet });
    const job = await skiplock.enqueue({ task: 'quick', payload: {} });
    const controller = new AbortController();
    const ticking = skiplock.tick({ budgetMs: 30_000, pollIntervalMs: 10, signal: controller.signal, drainMs: 100 });
    try {
      // Given back while the tick still runs, then claimed again and run: never reaped, never DEAD.
      const ran = await waitFor(async () => (await skiplock.getJob(job.id))!.status === 'DONE', 5_000);
      expect(ran).toBe(true);
    } finally {
      controller.abort();
      await ticking;
    }
    expect(await skiplock.getJob(job.id)).toMatchObject({ status: 'DONE', attempts: 1 });
    const lostAt = log.findIndex((e) => e.kind === 'claim' && !e.ok);
    const releasedAt = log.findIndex((e, i) => i > lostAt && e.kind === 'release' && e.ok);
    const nextClaimAt = log.findIndex((e, i) => i > lostAt && e.kind === 'claim');
    expect(lostAt).toBeGreaterThanOrEqual(0);
    expect(releasedAt).toBeGreaterThan(lostAt);
    expect(nextClaimAt).toBeGreaterThan(releasedAt);
  });

  test('what the tick sends as "known" is what it holds now, not every job it ever claimed', async () => {
    const task = defineTask({ name: 'quick', payload: z.object({}), handler: () => 'ok' });
    let claims = 0;
    const { sql, log } = wrapDriver({
      after: (s) => {
        if (isClaim(s) && (claims += 1) === 25) throw new Error('connection terminated: the answer was lost');
      },
    });
    const skiplock = createSkiplock({ sql, tasks: [task], log: quiet });
    await skiplock.enqueueBatch(Array.from({ length: 60 }, () => ({ task: 'quick', payload: {} })));
    const result = await skiplock.tick({ untilIdle: true, budgetMs: 30_000, concurrency: 2, pollIntervalMs: 10 });
    expect(claims).toBeGreaterThanOrEqual(25);
    const releases = log.filter((e) => e.kind === 'release');
    expect(releases.length).toBeGreaterThan(0);
    for (const release of releases) expect((release.values[2] as string[]).length).toBeLessThanOrEqual(2);
    const left = await db.sql.query(statement(`SELECT id, status, attempts, locked_by FROM skiplock.job WHERE status <> 'DONE'`));
    expect(left).toEqual([]);
    // The lost statement also wrote the previous batch's results: written again, they count as stale.
    expect(result.done + result.staleWrites).toBe(60);
  });
});

describe('a run is told apart from a later run of the same job', () => {
  test("a heartbeat's answer about attempt 1 does not stop attempt 2 (a zero-delay retry in the same tick)", async () => {
    const aborted: number[] = [];
    const task = defineTask({ name: 'retry-at-once', payload: z.object({}), backoff: () => 0, handler: async (_p, ctx) => {
      ctx.signal.addEventListener('abort', () => aborted.push(ctx.attempt));
      if (ctx.attempt === 1) {
        await sleep(400);
        throw new Error('transient');
      }
      await sleep(1_200);
      return 'second attempt done';
    } });
    // Heartbeats run every 300 ms and reach the database 250 ms late: the first one, sent for
    // attempt 1, is answered after attempt 2 started.
    const { sql } = wrapDriver({ before: (s) => (isHeartbeat(s) ? sleep(250) : undefined) });
    const skiplock = createSkiplock({ sql, tasks: [task], log: quiet });
    const job = await skiplock.enqueue({ task: 'retry-at-once', payload: {} });
    const result = await skiplock.tick({ untilIdle: true, budgetMs: 30_000, leaseMs: 900, pollIntervalMs: 10 });
    expect(aborted).toEqual([]);
    expect(result).toMatchObject({ claimed: 2, retried: 1, done: 1, staleWrites: 0 });
    expect(await skiplock.getJob(job.id)).toMatchObject({ status: 'DONE', attempts: 2, result: 'second attempt done' });
  });

  test('after DEAD → retry (attempts restart at 0), an old run of the same tick cannot write over the new one', async () => {
    let skiplock!: ReturnType<typeof createSkiplock>;
    let runs = 0;
    let secondStarted = false;
    const task = defineTask({ name: 'slow-once', payload: z.object({}), maxAttempts: 1, handler: async (_p, ctx) => {
      runs += 1;
      if (runs === 1) {
        // Meanwhile its lease expired and the reaper made it DEAD; a person retried it; this
        // same tick claimed it again: attempt 1 again, same worker.
        await db.sql.query(statement(
          `UPDATE skiplock.job SET status = 'DEAD', locked_by = NULL, locked_until = NULL, finished_at = now() WHERE id = $1`, [ctx.job.id]));
        await skiplock.retryJob(ctx.job.id);
        while (!secondStarted) await sleep(10);
        return 'old run';
      }
      secondStarted = true;
      await sleep(300);
      return 'new run';
    } });
    skiplock = createSkiplock({ sql: db.sql, tasks: [task], log: quiet });
    const job = await skiplock.enqueue({ task: 'slow-once', payload: {} });
    const result = await skiplock.tick({ untilIdle: true, budgetMs: 30_000, pollIntervalMs: 10 });
    expect(runs).toBe(2);
    expect(result).toMatchObject({ claimed: 2, done: 1, staleWrites: 1 });
    expect(await skiplock.getJob(job.id)).toMatchObject({ status: 'DONE', attempts: 1, result: 'new run' });
  });
});

describe('the budget counts from when the work started', () => {
  test('startedAt: a tick whose budget began earlier ends that much sooner, and claims only what fits in what is left', async () => {
    const task = defineTask({ name: 'two-seconds', payload: z.object({}), timeoutMs: 2_000, handler: () => 'ok' });
    const skiplock = createSkiplock({ sql: db.sql, tasks: [task], log: quiet });
    const job = await skiplock.enqueue({ task: 'two-seconds', payload: {} });
    const began = performance.now();
    // 3 s of budget, 2 s of it already spent (a slow enqueue before the tick): 1 s is left.
    const result = await skiplock.tick({ budgetMs: 3_000, marginMs: 200, pollIntervalMs: 50, startedAt: began - 2_000 });
    expect(performance.now() - began).toBeLessThan(2_000); // a correctness bound: the whole budget would be 3 s
    expect(result.claimed).toBe(0); // 2 s does not fit in the 0.8 s left
    expect(await skiplock.getJob(job.id)).toMatchObject({ status: 'QUEUED', attempts: 0 });
  });
});
