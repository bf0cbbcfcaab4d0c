/**
 * ctx.sleep and ctx.invoke (src/runtime/steps/steps.ts): a sleep holds no invocation (the job is WAITING
 * until it wakes); invokes awaited together are written in one statement, and the statement that
 * ends the last child wakes the parent (fan-in), exactly once; a failed child raises
 * ChildJobError; a person's retry of the child resumes the parent; cancel cascades.
 */
import pg from 'pg';
import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'vitest';
import { z } from 'zod';
import { ChildJobError, createSkiplock, defineTask, PermanentError, SkiplockError, type Task } from '../../src/index.ts';
import { completeAndClaim } from '../../src/store/claim.ts';
import { reapExpiredLeases, releaseUnseenClaims } from '../../src/store/leases.ts';
import { statement, type Sql, type Statement } from '../../src/store/sql.ts';
import { createTestDb, type TestDb } from '../support/db.ts';

let db: TestDb;
beforeAll(async () => {
  db = await createTestDb();
});
afterAll(() => db.drop());
beforeEach(async () => {
  await db.emptyJobs('skiplock.paused_task');
});

const quiet = () => {};
const T0 = new Date('2026-06-01T12:00:00.000Z');
const at = (ms: number) => new Date(T0.getTime() + ms);

async function rows(text: string, values: unknown[] = []) {
  return db.sql.query<Record<string, any>>(statement(text, values));
}
async function stepRows(jobId: string) {
  return rows(`SELECT id, kind, status, output, error, child_status, wake_at FROM skiplock.job_step WHERE job_id = $1 ORDER BY seq`, [jobId]);
}

/** Counts the statements sent, by a predicate on their text. */
function counting(sql: Sql) {
  const sent: Statement[] = [];
  const wrapped: Sql = { query: (s) => (sent.push(s), sql.query(s)), batch: (s) => sql.batch(s), close: async () => {} };
  return { sql: wrapped, texts: () => sent.map((s) => s.text), count: (test: (text: string) => boolean) => sent.filter((s) => test(s.text)).length };
}

describe('ctx.sleep', () => {
  test('a 5 s sleep: WAITING until it wakes, attempt given back, nothing held; a tick at the wake time resumes after it', async () => {
    const calls: string[] = [];
    const task = defineTask({
      name: 'napper',
      payload: z.object({}),
      handler: async (_p, ctx) => {
        await ctx.step('before', () => void calls.push('before'));
        await ctx.sleep('nap', 5_000);
        await ctx.step('after', () => void calls.push('after'));
        return 'rested';
      },
    });
    const sk = (ms: number) => createSkiplock({ sql: db.sql, tasks: [task], now: () => at(ms), log: quiet });
    const job = await sk(0).enqueue({ task: 'napper', payload: {} });
    // A sleep is counted as suspended, not as a retry (no attempt failed).
    expect(await sk(0).tick({ untilIdle: true })).toMatchObject({ claimed: 1, done: 0, retried: 0, suspended: 1 });
    expect(await sk(0).getJob(job.id)).toMatchObject({ status: 'WAITING', runAt: at(5_000), attempts: 0, lockedBy: null, lastError: null, stepCount: 2 });
    expect((await stepRows(job.id)).map((s) => [s.id, s.kind, s.status, s.wake_at])).toEqual([['before', 'step', 'done', null], ['nap', 'sleep', 'sleeping', at(5_000)]]);

    // Not due before its wake time; woken early by a person's "run now", it goes back to sleep.
    expect(await sk(4_000).tick({ untilIdle: true })).toMatchObject({ claimed: 0 });
    await sk(1_000).rescheduleJob(job.id, { delayMs: 0 });
    expect(await sk(1_000).tick({ untilIdle: true })).toMatchObject({ claimed: 1, done: 0 });
    expect(await sk(1_000).getJob(job.id)).toMatchObject({ status: 'WAITING', runAt: at(5_000), attempts: 0 });

    expect(await sk(5_000).tick({ untilIdle: true })).toMatchObject({ claimed: 1, done: 1 });
    expect(await sk(5_000).getJob(job.id)).toMatchObject({ status: 'DONE', result: 'rested', attempts: 1 });
    expect(calls).toEqual(['before', 'after']);
    expect((await stepRows(job.id)).map((s) => [s.id, s.status])).toEqual([['before', 'done'], ['nap', 'done'], ['after', 'done']]);
  });

  test('sleepUntil a past instant returns at once; invalid durations and dates are TypeErrors (DEAD)', async () => {
    const task = defineTask({
      name: 'sleepy',
      payload: z.object({ ms: z.number().optional(), until: z.string().optional() }),
      handler: async (p, ctx) => {
        if (p.until !== undefined) await ctx.sleepUntil('until', p.until);
        else await ctx.sleep('nap', p.ms!);
        return 'awake';
      },
    });
    const sk = createSkiplock({ sql: db.sql, tasks: [task], now: () => T0, log: quiet });
    const past = await sk.enqueue({ task: 'sleepy', payload: { until: '2020-01-01T00:00:00Z' } });
    const nan = await sk.enqueue({ task: 'sleepy', payload: { ms: -1 } });
    const far = await sk.enqueue({ task: 'sleepy', payload: { until: '2030-01-01T00:00:00Z' } });
    const bad = await sk.enqueue({ task: 'sleepy', payload: { until: 'tomorrow' } });
    await sk.tick({ untilIdle: true });
    expect(await sk.getJob(past.id)).toMatchObject({ status: 'DONE', result: 'awake' });
    expect(await sk.getJob(nan.id)).toMatchObject({ status: 'DEAD', lastError: 'TypeError: ctx.sleep("nap"): ms must be a finite number from 0 to 31536000000 (365 days), got -1' });
    expect(await sk.getJob(far.id)).toMatchObject({ status: 'DEAD', lastError: 'TypeError: ctx.sleepUntil("until"): 2030-01-01T00:00:00.000Z is more than 365 days away' });
    expect(await sk.getJob(bad.id)).toMatchObject({ status: 'DEAD', lastError: 'TypeError: ctx.sleepUntil("until"): not a valid date: tomorrow' });
  });
});

describe('ctx.invoke', () => {
  const child = (fail: { ids: Set<number> } = { ids: new Set() }) =>
    defineTask({
      name: 'child',
      payload: z.object({ n: z.number().int() }),
      maxAttempts: 1,
      handler: (p) => {
        if (fail.ids.has(p.n)) throw new PermanentError(`child ${p.n} failed`);
        return { n: p.n, squared: p.n * p.n };
      },
    });
  function fanOut(n: number, entries: { after: number }, caught?: unknown[]): Task {
    return defineTask({
      name: 'parent',
      payload: z.object({}),
      handler: async (_p, ctx) => {
        const results = await Promise.all(Array.from({ length: n }, (_, i) => ctx.invoke<{ n: number }>(`child-${i}`, 'child', { n: i }))).catch((error: unknown) => {
          caught?.push(error);
          throw error;
        });
        entries.after += 1;
        return results.map((r) => r.n);
      },
    });
  }

  test('100 children: written in one statement, the parent WAITING, resumed exactly once after the last, with the results in order', async () => {
    const entries = { after: 0 };
    const counted = counting(db.sql);
    const sk = createSkiplock({ sql: counted.sql, tasks: [fanOut(100, entries), child()], log: quiet });
    const parent = await sk.enqueue({ task: 'parent', payload: {} });
    await sk.pauseTask('child');
    // The parent only (the children wait): WAITING is counted as suspended, not as a retry.
    expect(await sk.tick({ untilIdle: true })).toMatchObject({ claimed: 1, retried: 0, suspended: 1 });
    expect(await sk.getJob(parent.id)).toMatchObject({ status: 'WAITING', attempts: 0, pendingChildren: 100, stepCount: 100, lockedBy: null, finishedAt: null });
    expect(counted.count((t) => t.includes('INSERT INTO skiplock.job_record AS j') && t.includes('parent_id, parent_step)'))).toBe(1);
    const children = await rows(`SELECT j.id::text AS id, j.parent_step FROM skiplock.job j WHERE j.parent_id = $1 ORDER BY j.id`, [parent.id]);
    expect(children.map((c) => c.parent_step)).toEqual(Array.from({ length: 100 }, (_, i) => `child-${i}`));

    await sk.resumeTask('child');
    for (let i = 0; i < 20 && (await sk.getJob(parent.id))!.status !== 'DONE'; i++) await sk.tick({ untilIdle: true, concurrency: 25 });
    expect(await sk.getJob(parent.id)).toMatchObject({ status: 'DONE', result: Array.from({ length: 100 }, (_, i) => i), attempts: 1, pendingChildren: 0 });
    expect(entries.after).toBe(1);
    const steps = await stepRows(parent.id);
    expect(steps.every((s) => s.kind === 'invoke' && s.status === 'done' && s.child_status === 'DONE')).toBe(true);
    expect(steps[7]!.output).toEqual({ n: 7, squared: 49 });
  }, 30_000);

  test('children finishing concurrently on parallel ticks wake the parent exactly once', async () => {
    const entries = { after: 0 };
    const tasks = [fanOut(60, entries), child()];
    const sk = createSkiplock({ sql: db.sql, tasks, log: quiet });
    const parent = await sk.enqueue({ task: 'parent', payload: {} });
    await sk.pauseTask('child');
    await sk.tick({ untilIdle: true });
    expect((await sk.getJob(parent.id))!.status).toBe('WAITING');
    await sk.resumeTask('child');
    await Promise.all(Array.from({ length: 6 }, (_, i) => createSkiplock({ sql: db.sql, tasks, log: quiet }).tick({ untilIdle: true, concurrency: 3, workerName: `w${i}` })));
    await sk.tick({ untilIdle: true });
    expect(await sk.getJob(parent.id)).toMatchObject({ status: 'DONE', pendingChildren: 0 });
    expect(entries.after).toBe(1);
    // Exactly one WAITING → QUEUED wake in the parent's history: one attempt that waited, one that finished.
    expect((await sk.getJob(parent.id))!.history.map((h) => h.outcome)).toEqual(['waiting', 'done']);
  }, 30_000);

  test('a DEAD child raises ChildJobError in the parent (DEAD); a person retries the child, it succeeds, the parent resumes to DONE', async () => {
    const entries = { after: 0 };
    const caught: unknown[] = [];
    const fail = { ids: new Set([1]) };
    const sk = createSkiplock({ sql: db.sql, tasks: [fanOut(2, entries, caught), child(fail)], now: () => T0, log: quiet });
    const parent = await sk.enqueue({ task: 'parent', payload: {} });
    for (let i = 0; i < 4; i++) await sk.tick({ untilIdle: true });
    const dead = (await sk.getJob(parent.id))!;
    expect(dead.status).toBe('DEAD');
    const [failedChild] = await rows(`SELECT id::text FROM skiplock.job WHERE parent_id = $1 AND parent_step = 'child-1'`, [parent.id]);
    expect(caught).toHaveLength(1);
    const error = caught[0] as ChildJobError;
    expect(error).toBeInstanceOf(ChildJobError);
    expect(error).toMatchObject({ childId: failedChild!.id, childTask: 'child', childStatus: 'DEAD', childError: 'PermanentError: child 1 failed', stepId: 'child-1', permanent: true });
    expect(dead.lastError).toBe(`ChildJobError: child job ${failedChild!.id} (task child, step "child-1") ended DEAD: PermanentError: child 1 failed`);
    expect(dead.attempts).toBe(1); // a stored failure is permanent: no retries burnt

    fail.ids.clear();
    await sk.retryJob(failedChild!.id);
    for (let i = 0; i < 3; i++) await sk.tick({ untilIdle: true });
    expect(await sk.getJob(parent.id)).toMatchObject({ status: 'DONE', result: [0, 1] });
    expect(entries.after).toBe(1);
  });

  test('a child that succeeds after its parent died of it while running: a person\'s retry of the parent takes the child\'s result', async () => {
    const entries = { after: 0 };
    const fail = { ids: new Set([1]) };
    const sk = createSkiplock({ sql: db.sql, tasks: [fanOut(2, entries), child(fail)], now: () => T0, log: quiet });
    const parent = await sk.enqueue({ task: 'parent', payload: {} });
    for (let i = 0; i < 4; i++) await sk.tick({ untilIdle: true });
    expect(await sk.getJob(parent.id)).toMatchObject({ status: 'DEAD' });
    // The child was retried and ended DONE while the parent's run (which then died of the stored
    // failure) held it RUNNING: that end could not reach the parent.
    const [failedChild] = await rows(`SELECT id::text FROM skiplock.job WHERE parent_id = $1 AND parent_step = 'child-1'`, [parent.id]);
    await rows(`UPDATE skiplock.job SET status = 'DONE', result = '{"n": 1, "squared": 1}', last_error = NULL WHERE id = $1`, [failedChild!.id]);
    await expect(sk.retryJob(failedChild!.id)).rejects.toMatchObject({ code: 'conflict' });

    await sk.retryJob(parent.id);
    expect((await stepRows(parent.id)).map((s) => [s.id, s.status, s.child_status])).toEqual([['child-0', 'done', 'DONE'], ['child-1', 'done', 'DONE']]);
    await sk.tick({ untilIdle: true });
    expect(await sk.getJob(parent.id)).toMatchObject({ status: 'DONE', result: [0, 1] });
  });

  test('a parent that handled a child\'s failure and later died of something else is not revived when the child is retried', async () => {
    const fail = { ids: new Set([0]) };
    const handled: string[] = [];
    let caught = 0;
    const parent = defineTask({
      name: 'parent',
      payload: z.object({}),
      handler: async (_p, ctx) => {
        await ctx.invoke('charge', 'child', { n: 0 }).catch(() => ((caught += 1), ctx.step('release-hold', () => void handled.push('released'))));
        throw new PermanentError('gave up later');
      },
    });
    const sk = createSkiplock({ sql: db.sql, tasks: [parent, child(fail)], now: () => T0, log: quiet });
    const job = await sk.enqueue({ task: 'parent', payload: {} });
    for (let i = 0; i < 4; i++) await sk.tick({ untilIdle: true });
    expect(await sk.getJob(job.id)).toMatchObject({ status: 'DEAD', lastError: 'PermanentError: gave up later' });
    expect(handled).toEqual(['released']);

    fail.ids.clear();
    const [charge] = await rows(`SELECT id::text FROM skiplock.job WHERE parent_id = $1`, [job.id]);
    await sk.retryJob(charge!.id);
    for (let i = 0; i < 3; i++) await sk.tick({ untilIdle: true });
    expect(await sk.getJob(charge!.id)).toMatchObject({ status: 'DONE' });
    // Its run acted on the failure: the parent stays DEAD, and its step as it saw it.
    expect(await sk.getJob(job.id)).toMatchObject({ status: 'DEAD', lastError: 'PermanentError: gave up later' });
    expect((await stepRows(job.id)).map((s) => [s.id, s.status, s.child_status])).toEqual([['charge', 'failed', 'DEAD'], ['release-hold', 'done', null]]);

    // A person's retry of the parent replays the run it made: the failure it handled, not the
    // child's later success (the refresh of a retried parent's steps applies only to a parent
    // that died of that child).
    await sk.retryJob(job.id);
    expect((await stepRows(job.id)).map((s) => [s.id, s.status, s.child_status])).toEqual([['charge', 'failed', 'DEAD'], ['release-hold', 'done', null]]);
    await sk.tick({ untilIdle: true });
    expect(caught).toBe(2);
    expect(await sk.getJob(job.id)).toMatchObject({ status: 'DEAD', lastError: 'PermanentError: gave up later' });
  });

  test('a child retried while its parent still waits for others: waited for again, the parent wakes once with both results', async () => {
    const entries = { after: 0 };
    const fail = { ids: new Set([0]) };
    const sk = createSkiplock({ sql: db.sql, tasks: [fanOut(2, entries), child(fail)], now: () => T0, log: quiet });
    const parent = await sk.enqueue({ task: 'parent', payload: {} });
    await sk.pauseTask('child');
    await sk.tick({ untilIdle: true });
    const [first, second] = await rows(`SELECT j.id::text AS id FROM skiplock.job j WHERE j.parent_id = $1 ORDER BY j.id`, [parent.id]);
    await rows(`UPDATE skiplock.job SET run_at = $2 WHERE id = $1`, [second!.id, at(3_600_000)]);
    await sk.resumeTask('child');
    await sk.tick({ untilIdle: true }); // child 0 ends DEAD; child 1 is not due yet
    expect(await sk.getJob(first!.id)).toMatchObject({ status: 'DEAD' });
    expect(await sk.getJob(parent.id)).toMatchObject({ status: 'WAITING', pendingChildren: 1 });
    fail.ids.clear();
    await sk.retryJob(first!.id);
    expect(await sk.getJob(parent.id)).toMatchObject({ status: 'WAITING', pendingChildren: 2 });
    await sk.tick({ untilIdle: true });
    expect(await sk.getJob(parent.id)).toMatchObject({ status: 'WAITING', pendingChildren: 1 });
    await sk.rescheduleJob(second!.id, { delayMs: 0 });
    for (let i = 0; i < 3; i++) await sk.tick({ untilIdle: true });
    expect(await sk.getJob(parent.id)).toMatchObject({ status: 'DONE', result: [0, 1] });
    expect(entries.after).toBe(1);
  });

  test('an invalid payload or an unknown task: the invoke rejects, nothing is written', async () => {
    const seen: unknown[] = [];
    const task = defineTask({
      name: 'sloppy',
      payload: z.object({ task: z.string(), payload: z.unknown() }),
      handler: async (p, ctx) => {
        try {
          await ctx.invoke('call', p.task, p.payload);
        } catch (error) {
          seen.push(error);
          throw error;
        }
      },
    });
    const sk = createSkiplock({ sql: db.sql, tasks: [task, child()], now: () => T0, log: quiet });
    const invalid = await sk.enqueue({ task: 'sloppy', payload: { task: 'child', payload: { n: 'one' } } });
    const unknown = await sk.enqueue({ task: 'sloppy', payload: { task: 'nope', payload: {} } });
    await sk.tick({ untilIdle: true });
    expect(seen[0]).toBeInstanceOf(SkiplockError);
    expect(seen[0]).toMatchObject({ code: 'invalid_payload', message: 'invalid payload for task child' });
    expect(seen[1]).toMatchObject({ code: 'unknown_task' });
    expect(await sk.getJob(invalid.id)).toMatchObject({ status: 'DEAD', stepCount: 0, pendingChildren: 0 }); // permanent: the payload will not change
    expect(await sk.getJob(unknown.id)).toMatchObject({ status: 'QUEUED', stepCount: 0 }); // retried: a deployment may add the task
    expect((await rows(`SELECT count(*)::int AS n FROM skiplock.job`))[0]!.n).toBe(2);
    expect((await rows(`SELECT count(*)::int AS n FROM skiplock.job_step`))[0]!.n).toBe(0);
  });
});

describe('cancel and retry of a waiting parent', () => {
  test('cancelling a WAITING parent cancels its QUEUED and WAITING descendants in the same statement; retrying it is refused while WAITING', async () => {
    const leaf = defineTask({ name: 'leaf', payload: z.object({}), handler: () => 'leaf' });
    const mid = defineTask({ name: 'mid', payload: z.object({}), handler: async (_p, ctx) => ctx.invoke('leaf', 'leaf', {}) });
    const root = defineTask({ name: 'root', payload: z.object({}), handler: async (_p, ctx) => Promise.all([ctx.invoke('mid', 'mid', {}), ctx.invoke('leaf', 'leaf', {})]) });
    const sk = createSkiplock({ sql: db.sql, tasks: [root, mid, leaf], now: () => T0, log: quiet });
    await sk.pauseTask('leaf');
    const job = await sk.enqueue({ task: 'root', payload: {} });
    await sk.tick({ untilIdle: true });
    await sk.tick({ untilIdle: true });
    const tree = async () => Object.fromEntries((await rows(
      `SELECT coalesce(parent_step, 'root') || ':' || task AS name, status, pending_children FROM skiplock.job ORDER BY id`,
    )).map((r) => [r.name, `${r.status}/${r.pending_children}`]));
    expect(await tree()).toEqual({ 'root:root': 'WAITING/2', 'mid:mid': 'WAITING/1', 'leaf:leaf': 'QUEUED/0' });
    expect((await rows(`SELECT count(*)::int AS n FROM skiplock.job WHERE task = 'leaf'`))[0]!.n).toBe(2);

    await expect(sk.retryJob(job.id)).rejects.toMatchObject({ code: 'conflict' });
    expect(await sk.cancelJob(job.id)).toMatchObject({ outcome: 'cancelled', job: { status: 'CANCELLED' } });
    expect((await rows(`SELECT status, count(*)::int AS n FROM skiplock.job GROUP BY status`)).map((r) => [r.status, r.n])).toEqual([['CANCELLED', 4]]);
    expect((await rows(`SELECT status, child_status, count(*)::int AS n FROM skiplock.job_step WHERE kind = 'invoke' GROUP BY 1, 2`)).map((r) => [r.status, r.child_status, r.n])).toEqual([['failed', 'CANCELLED', 3]]);
    expect((await rows(`SELECT sum(pending_children)::int AS n FROM skiplock.job`))[0]!.n).toBe(0);

    // A person's retry of the cancelled parent: its children are stored as cancelled, so it fails at once (no wait for ever).
    await sk.resumeTask('leaf');
    await sk.retryJob(job.id);
    await sk.tick({ untilIdle: true });
    expect(await sk.getJob(job.id)).toMatchObject({ status: 'DEAD' });
    expect((await sk.getJob(job.id))!.lastError).toMatch(/^ChildJobError: child job \d+ \(task mid, step "mid"\) ended CANCELLED: cancelled with its parent job/);
  });

  test('a RUNNING parent asked to stop invokes no child: it ends CANCELLED, nothing enqueued', async () => {
    const leaf = defineTask({ name: 'leaf', payload: z.object({}), handler: () => 'leaf' });
    let entered!: () => void;
    const inStep = new Promise<void>((resolve) => (entered = resolve));
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const root = defineTask({
      name: 'root',
      payload: z.object({}),
      handler: async (_p, ctx) => {
        await ctx.step('prepare', async () => {
          entered();
          await gate;
        });
        return ctx.invoke('leaf', 'leaf', {});
      },
    });
    const sk = createSkiplock({ sql: db.sql, tasks: [root, leaf], now: () => T0, log: quiet });
    const job = await sk.enqueue({ task: 'root', payload: {} });
    const ticking = sk.tick({ untilIdle: true, leaseMs: 60_000 });
    await inStep;
    expect(await sk.cancelJob(job.id)).toMatchObject({ outcome: 'requested' });
    release();
    expect(await ticking).toMatchObject({ cancelled: 1 });
    expect(await sk.getJob(job.id)).toMatchObject({ status: 'CANCELLED', pendingChildren: 0 });
    expect((await rows(`SELECT count(*)::int AS n FROM skiplock.job WHERE task = 'leaf'`))[0]!.n).toBe(0);
    expect((await stepRows(job.id)).map((s) => s.id)).toEqual(['prepare']);
  });

  test('a cancel that arrives while the parent\'s invoke is committing still cancels the children that invoke wrote', async () => {
    // The invoke statement runs in a transaction of its own connection, held open (its row lock on
    // the parent with it) until the cancel is waiting on that lock: the cancel must see the
    // children the invoke commits, not only those its statement's snapshot saw.
    const leaf = defineTask({ name: 'leaf', payload: z.object({}), handler: () => 'leaf' });
    const root = defineTask({ name: 'root', payload: z.object({}), handler: async (_p, ctx) => ctx.invoke('leaf', 'leaf', {}) });
    const held = new pg.Client({ connectionString: db.url });
    await held.connect();
    let invoking!: () => void;
    const invokeHeld = new Promise<void>((resolve) => (invoking = resolve));
    let commit!: () => void;
    const committed = new Promise<void>((resolve) => (commit = resolve));
    let answered!: () => void;
    const cancelAnswered = new Promise<void>((resolve) => (answered = resolve));
    const wrapped: Sql = {
      async query(s) {
        if (!/\bchildren AS \(\s*INSERT INTO skiplock\.job(_record)?\b/.test(s.text)) return db.sql.query(s);
        await held.query('BEGIN');
        const result = await held.query(s.text, s.values as unknown[]);
        invoking();
        await committed;
        await held.query('COMMIT');
        // The run goes on (its result write: the parent WAITING) only once the cancel has answered.
        // Without this the two raced for the parent's row once the COMMIT woke the cancel, and on
        // a loaded machine the write sometimes came first: the cancel, seen waiting on the lock,
        // then found the parent WAITING and answered 'cancelled', not 'requested' (2 failures in
        // about 40 runs under load; issue 21 item 16). The order asserted below is now the only one.
        await cancelAnswered;
        return result.rows;
      },
      batch: (statements) => db.sql.batch(statements),
      close: async () => {},
    };
    try {
      const sk = createSkiplock({ sql: wrapped, tasks: [root, leaf], now: () => T0, log: quiet });
      await sk.pauseTask('leaf');
      const job = await sk.enqueue({ task: 'root', payload: {} });
      const ticking = sk.tick({ untilIdle: true, leaseMs: 60_000 });
      await invokeHeld;
      const cancelling = sk.cancelJob(job.id);
      void cancelling.finally(answered).catch(() => {});
      // The cancel is waiting for the parent's row lock.
      await expect.poll(async () => (await rows(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()`))[0]!.n, { timeout: 5_000 }).toBe(1);
      commit();
      expect(await cancelling).toMatchObject({ outcome: 'requested' });
      expect(await ticking).toMatchObject({ cancelled: 1 });
      expect(await sk.getJob(job.id)).toMatchObject({ status: 'CANCELLED', pendingChildren: 0 });
      expect((await rows(`SELECT status FROM skiplock.job WHERE task = 'leaf'`)).map((r) => r.status)).toEqual(['CANCELLED']);
      expect((await stepRows(job.id)).map((s) => [s.id, s.status, s.child_status])).toEqual([['leaf', 'failed', 'CANCELLED']]);
    } finally {
      commit();
      answered();
      await held.end();
    }
  });

  test('a cancel whose transaction PostgreSQL aborts as a deadlock victim (40P01) is sent again', async () => {
    // A cancel locks parent then children, a child's result write child then parent: when they
    // meet, one of them is aborted, having written nothing. Here the first transaction is refused
    // as PostgreSQL refuses a deadlock victim; the second runs on the real database.
    let refused = 0;
    const flaky: Sql = {
      query: (s) => db.sql.query(s),
      batch: (statements) => (refused++ === 0 ? Promise.reject(Object.assign(new Error('deadlock detected'), { code: '40P01' })) : db.sql.batch(statements)),
      close: async () => {},
    };
    const leaf = defineTask({ name: 'leaf', payload: z.object({}), handler: () => 'leaf' });
    const sk = createSkiplock({ sql: flaky, tasks: [leaf], now: () => T0, log: quiet });
    const job = await sk.enqueue({ task: 'leaf', payload: {}, delayMs: 60_000 });
    expect(await sk.cancelJob(job.id)).toMatchObject({ outcome: 'cancelled', job: { status: 'CANCELLED' } });
    expect(refused).toBe(2);
  });

  test('cancelling a QUEUED child of a WAITING parent wakes the parent with ChildJobError', async () => {
    const leaf = defineTask({ name: 'leaf', payload: z.object({}), handler: () => 'leaf' });
    const caught: unknown[] = [];
    const root = defineTask({
      name: 'root',
      payload: z.object({}),
      handler: async (_p, ctx) => ctx.invoke('leaf', 'leaf', {}).catch((error: unknown) => (caught.push(error), 'went on without it')),
    });
    const sk = createSkiplock({ sql: db.sql, tasks: [root, leaf], now: () => T0, log: quiet });
    await sk.pauseTask('leaf');
    const job = await sk.enqueue({ task: 'root', payload: {} });
    await sk.tick({ untilIdle: true });
    const [leafJob] = await rows(`SELECT id::text FROM skiplock.job WHERE task = 'leaf'`);
    await sk.cancelJob(leafJob!.id);
    expect(await sk.getJob(job.id)).toMatchObject({ status: 'QUEUED', pendingChildren: 0 });
    await sk.tick({ untilIdle: true });
    expect(await sk.getJob(job.id)).toMatchObject({ status: 'DONE', result: 'went on without it' });
    expect(caught[0]).toMatchObject({ name: 'ChildJobError', childStatus: 'CANCELLED', childId: leafJob!.id });

    // A person retries the child, which now runs to DONE: the parent stays DONE, its step as it saw it.
    await sk.retryJob(leafJob!.id);
    await sk.resumeTask('leaf');
    await sk.tick({ untilIdle: true });
    expect(await sk.getJob(leafJob!.id)).toMatchObject({ status: 'DONE' });
    expect(await sk.getJob(job.id)).toMatchObject({ status: 'DONE', result: 'went on without it' });
    expect((await stepRows(job.id)).map((s) => [s.status, s.child_status])).toEqual([['failed', 'CANCELLED']]);
  });

  test('a child the reaper ends DEAD (its last attempt lost its lease) wakes its parent with ChildJobError', async () => {
    const leaf = defineTask({ name: 'leaf', payload: z.object({}), maxAttempts: 1, handler: () => 'leaf' });
    const root = defineTask({ name: 'root', payload: z.object({}), handler: async (_p, ctx) => ctx.invoke('leaf', 'leaf', {}) });
    const sk = (ms: number) => createSkiplock({ sql: db.sql, tasks: [root, leaf], now: () => at(ms), log: quiet });
    await sk(0).pauseTask('leaf');
    const job = await sk(0).enqueue({ task: 'root', payload: {} });
    await sk(0).tick({ untilIdle: true });
    // The child was claimed by a worker that then vanished.
    await rows(`UPDATE skiplock.job SET status = 'RUNNING', attempts = 1, locked_by = 'gone', locked_until = $1, started_at = $1 WHERE task = 'leaf'`, [at(0)]);
    expect(await sk(60_000).reap()).toBe(1);
    expect(await sk(60_000).getJob(job.id)).toMatchObject({ status: 'QUEUED', pendingChildren: 0 });
    await sk(60_000).tick({ untilIdle: true });
    expect((await sk(60_000).getJob(job.id))!.lastError).toMatch(/^ChildJobError: child job \d+ \(task leaf, step "leaf"\) ended DEAD: lease expired on attempt 1/);
  });
});

describe('the wake-up of a self-scheduling ticker', () => {
  test('ignores a WAITING parent; wakes for a sleeping job at its wake time', async () => {
    const leaf = defineTask({ name: 'leaf', payload: z.object({}), handler: () => 'leaf' });
    const root = defineTask({ name: 'root', payload: z.object({}), handler: async (_p, ctx) => ctx.invoke('leaf', 'leaf', {}) });
    const napper = defineTask({ name: 'napper', payload: z.object({}), handler: async (_p, ctx) => ctx.sleep('nap', 30_000) });
    const sk = createSkiplock({ sql: db.sql, tasks: [root, leaf, napper], now: () => T0, log: quiet });
    await sk.pauseTask('leaf');
    await sk.enqueue({ task: 'root', payload: {} });
    await sk.tick({ untilIdle: true });
    expect(await sk.msUntilNextWork()).toBe(null); // a WAITING parent, and its child's task paused
    await sk.enqueue({ task: 'napper', payload: {} });
    await sk.tick({ untilIdle: true });
    expect(await sk.msUntilNextWork()).toBe(30_000);
  });
});

/**
 * A statement updates a row once: a second UPDATE of the same row in one statement is silently
 * skipped. A child's end counts its parent down (fan-in), so no statement may end a child and
 * also update its parent another way — else the count-down is lost and the parent waits for ever.
 */
describe('a child\'s end and another update of its parent never share a statement', () => {
  /** A parent (in `status`) with one waiting invoke step per child, and its RUNNING children. */
  async function family(p: { parent: string; children: number; parentLeaseExpired?: boolean; expiredChildren?: number }) {
    const [parent] = await rows(
      `INSERT INTO skiplock.job (task, status, attempts, max_attempts, locked_by, locked_until, started_at, pending_children, step_count, run_at)
       VALUES ('parent', $1, $2, 5, $3, $4, $5, $6, $6, now() - interval '1 second') RETURNING id::text`,
      p.parent === 'RUNNING'
        ? ['RUNNING', 1, 'gone', p.parentLeaseExpired ? new Date(Date.now() - 60_000) : new Date(Date.now() + 3_600_000), new Date(), p.children]
        : [p.parent, 0, null, null, null, p.children],
    );
    const children: string[] = [];
    for (let i = 0; i < p.children; i++) {
      const lease = i < (p.expiredChildren ?? 0) ? new Date(Date.now() - 60_000) : new Date(Date.now() + 3_600_000);
      const [child] = await rows(
        `INSERT INTO skiplock.job (task, status, attempts, max_attempts, locked_by, locked_until, started_at, parent_id, parent_step)
         VALUES ('child', 'RUNNING', 1, 1, 'w', $1, now(), $2, $3) RETURNING id::text`,
        [lease, parent!.id, `c${i}`],
      );
      children.push(child!.id);
      await rows(`INSERT INTO skiplock.job_step (job_id, id, seq, kind, status, attempts, started_at, child_id, child_task)
                  VALUES ($1, $2, $3, 'invoke', 'waiting', 0, now(), $4, 'child')`, [parent!.id, `c${i}`, i, child!.id]);
    }
    return { parent: parent!.id as string, children };
  }
  const pendingOf = async (id: string) => (await rows(`SELECT status, pending_children FROM skiplock.job WHERE id = $1`, [id]))[0];

  test('a result write that ends a child does not also claim its QUEUED parent', async () => {
    // A QUEUED parent with children outstanding: the reaper returned it after its invoke, or a
    // person retried it while they run.
    const { parent, children } = await family({ parent: 'QUEUED', children: 2 });
    const answer = await db.sql.query(completeAndClaim({
      now: null, workerId: 'w', results: [{ id: children[0]!, attempt: 1, status: 'DONE', result: { ok: 1 }, error: null, delay_ms: 0, release: false }],
      limit: 5, budgetMs: 100_000, tasks: ['parent', 'child'], leaseMs: 60_000, leaseGraceMs: 1_000, fanIn: true,
    }));
    expect(answer.filter((r) => r.id !== null).map((r) => String(r.id))).not.toContain(parent);
    expect(await pendingOf(parent)).toEqual({ status: 'QUEUED', pending_children: 1 });
    // The next claim takes it.
    const next = await db.sql.query(completeAndClaim({ now: null, workerId: 'w', results: [], limit: 5, budgetMs: 100_000, tasks: ['parent'], leaseMs: 60_000, leaseGraceMs: 1_000 }));
    expect(next.filter((r) => r.id !== null).map((r) => String(r.id))).toEqual([parent]);
  });

  test('the reaper does not reap a parent in the statement that reaps its child', async () => {
    const { parent, children } = await family({ parent: 'RUNNING', children: 3, parentLeaseExpired: true, expiredChildren: 1 });
    const [first] = await db.sql.query(reapExpiredLeases({ now: null, limit: 10 }));
    expect(first).toEqual({ reaped: 1, dead: 1 });
    expect(await pendingOf(parent)).toEqual({ status: 'RUNNING', pending_children: 2 });
    expect(await pendingOf(children[0]!)).toMatchObject({ status: 'DEAD' });
    // The next reap takes the parent.
    const [second] = await db.sql.query(reapExpiredLeases({ now: null, limit: 10 }));
    expect(second).toEqual({ reaped: 1, dead: 0 });
    expect(await pendingOf(parent)).toEqual({ status: 'QUEUED', pending_children: 2 });
  });

  test('giving back a lost claim does not give back a parent in the statement that cancels its child', async () => {
    const { parent, children } = await family({ parent: 'RUNNING', children: 2 });
    await rows(`UPDATE skiplock.job SET locked_by = 'lost#1' WHERE id = ANY ($1::bigint[])`, [[parent, children[0]]]);
    await rows(`UPDATE skiplock.job SET cancel_requested = true WHERE id = $1`, [children[0]]);
    const first = await db.sql.query(releaseUnseenClaims({ now: null, workerId: 'lost', known: [] }));
    expect(first.map((r) => r.id)).toEqual([children[0]]);
    expect(await pendingOf(children[0]!)).toMatchObject({ status: 'CANCELLED' });
    expect(await pendingOf(parent)).toEqual({ status: 'RUNNING', pending_children: 1 });
    const second = await db.sql.query(releaseUnseenClaims({ now: null, workerId: 'lost', known: [] }));
    expect(second.map((r) => r.id)).toEqual([parent]);
    expect(await pendingOf(parent)).toEqual({ status: 'QUEUED', pending_children: 1 });
  });
});
