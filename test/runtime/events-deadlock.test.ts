/**
 * A send and a callback POST that PostgreSQL aborts as a deadlock victim (40P01) are sent again,
 * as a cancel is (issue 30 item 5). Each deadlock is made for real: a second connection holds, in
 * an open transaction, the row the skiplock statement needs, waits until that statement is
 * blocked on it, then asks for the row the statement already holds. The skiplock statement
 * waited first, so its deadlock check runs first and it is the one aborted (the holder's check is
 * also put off); the holder then commits, and the transaction sent again goes through.
 */
import pg from 'pg';
import { afterAll, beforeAll, beforeEach, expect, test } from 'vitest';
import { z } from 'zod';
import { createSkiplock, defineTask } from '../../src/index.ts';
import { statement } from '../../src/store/sql.ts';
import { createTestDb, type TestDb } from '../support/db.ts';

let db: TestDb;
beforeAll(async () => {
  db = await createTestDb();
});
afterAll(() => db.drop());
beforeEach(async () => {
  await db.emptyJobs('skiplock.event', 'skiplock.paused_task');
});

const quiet = () => {};
const T0 = new Date('2026-06-01T12:00:00.000Z');
const rows = (text: string, values: unknown[] = []) => db.sql.query<Record<string, any>>(statement(text, values));
const lockWaiters = async () =>
  (await rows(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()`))[0]!.n;

/** A second connection in an open transaction whose own deadlock check comes late (so the other side is the victim). */
async function holder() {
  const held = new pg.Client({ connectionString: db.url });
  await held.connect();
  await held.query('BEGIN');
  await held.query(`SET LOCAL deadlock_timeout = '30s'`);
  return held;
}

test('sendEvent: its cancelOn cascade (parent, then child) meets a write that locked the child, then the parent: sent again, answered', async () => {
  const leaf = defineTask({ name: 'leaf', payload: z.object({}), handler: () => 'leaf' });
  const root = defineTask({
    name: 'root',
    payload: z.object({}),
    cancelOn: [{ event: 'order.cancelled', key: 'o-1' }],
    handler: async (_p, ctx) => ctx.invoke('leaf', 'leaf', {}),
  });
  let clock = 0;
  const sk = createSkiplock({ sql: db.sql, tasks: [root, leaf], now: () => new Date(T0.getTime() + clock), log: quiet, retention: false });
  await sk.pauseTask('leaf');
  const parent = await sk.enqueue({ task: 'root', payload: {} });
  await sk.tick({ untilIdle: true });
  expect(await sk.getJob(parent.id)).toMatchObject({ status: 'WAITING' });
  const [child] = await rows(`SELECT id::text FROM skiplock.job WHERE task = 'leaf'`);

  clock = 1_000;
  const held = await holder();
  try {
    // As a child's result write does: the child's row first …
    await held.query(`UPDATE skiplock.job SET updated_at = updated_at WHERE id = $1`, [child!.id]);
    const sending = sk.sendEvent({ name: 'order.cancelled', key: 'o-1' });
    void sending.catch(() => {});
    await expect.poll(lockWaiters, { timeout: 5_000 }).toBe(1);
    // … then its parent's, which the send holds: a deadlock; the send is aborted.
    await held.query(`UPDATE skiplock.job SET updated_at = updated_at WHERE id = $1`, [parent.id]);
    await held.query('COMMIT');
    expect(await sending).toMatchObject({ cancelled: 1, created: true });
  } finally {
    await held.end();
  }
  expect(await sk.getJob(parent.id)).toMatchObject({ status: 'CANCELLED' });
  expect(await sk.getJob(child!.id)).toMatchObject({ status: 'CANCELLED' });
  expect((await rows(`SELECT count(*)::int AS n FROM skiplock.event`))[0]!.n).toBe(1);
});

test('completeCallback: its step-then-job write meets a restart (job, then steps): sent again, completed', async () => {
  const urls: string[] = [];
  const approve = defineTask({
    name: 'approve',
    payload: z.object({}),
    handler: async (_p, ctx) => {
      urls.push((await ctx.createCallback('approval')).url);
      return ctx.waitForCallback('approval');
    },
  });
  const sk = createSkiplock({
    sql: db.sql, tasks: [approve], now: () => T0, log: quiet, retention: false,
    callbacks: { secret: 'a-callback-secret-of-some-length', publicUrl: 'https://jobs.example.com' },
  });
  const job = await sk.enqueue({ task: 'approve', payload: {} });
  await sk.tick({ untilIdle: true });
  expect(await sk.getJob(job.id)).toMatchObject({ status: 'WAITING' });
  const token = urls[0]!.split('/').pop()!;

  const held = await holder();
  try {
    // As a restart does: the job's row first (lockJob) …
    await held.query(`SELECT id FROM skiplock.queue WHERE id = $1 FOR UPDATE`, [job.id]);
    const completing = sk.completeCallback(token, { approved: true });
    void completing.catch(() => {});
    await expect.poll(lockWaiters, { timeout: 5_000 }).toBe(1);
    // … then its steps, one of which the callback's write holds: a deadlock; the callback is aborted.
    await held.query(`UPDATE skiplock.job_step SET status = status WHERE job_id = $1`, [job.id]);
    await held.query('COMMIT');
    expect(await completing).toBe('completed');
  } finally {
    await held.end();
  }
  await sk.tick({ untilIdle: true });
  expect(await sk.getJob(job.id)).toMatchObject({ status: 'DONE', result: { data: { approved: true } } });
});
