/**
 * Issue 35, the keys of fair share and batches (migration 022): every way a job is made writes
 * them into its record and its queue row, and bad keys are refused before anything is written.
 */
import { afterAll, beforeAll, expect, test } from 'vitest';
import { z } from 'zod';
import { createSkiplock, defineTask } from '../../src/index.ts';
import { statement } from '../../src/store/sql.ts';
import { createTestDb, type TestDb } from '../support/db.ts';

let db: TestDb;
beforeAll(async () => {
  db = await createTestDb();
});
afterAll(() => db.drop());

const payload = z.object({ tenant: z.string(), n: z.number().optional() });
const fair = defineTask({ name: 'fair', payload, fairness: { key: (p) => p.tenant }, on: 'signup', handler: () => {} });
const open = defineTask({ name: 'open', payload, fairness: {}, handler: () => {} });
const plain = defineTask({ name: 'plain', payload, handler: () => {} });
const batched = defineTask({ name: 'batched', payload, batch: { maxSize: 10, maxWaitMs: 1000, key: (p) => `b-${p.tenant}` }, handler: () => {} });

const make = () => createSkiplock({ sql: db.sql, tasks: [fair, open, plain, batched], log: () => {}, retention: false });

async function keysOf(id: string) {
  const [row] = await db.sql.query(statement(
    `SELECT r.fair_key, r.batch_key, q.fair_key AS q_fair, q.batch_key AS q_batch
       FROM skiplock.job_record r LEFT JOIN skiplock.queue q ON q.id = r.id WHERE r.id = $1`, [id]));
  return row;
}

test('the task computes the key; an enqueue may give one; both rows hold it, and the job shows it', async () => {
  const skiplock = make();
  const a = await skiplock.enqueue({ task: 'fair', payload: { tenant: 'acme' } });
  expect(a.fairnessKey).toBe('acme');
  expect(a.batchKey).toBeNull();
  expect(await keysOf(a.id)).toEqual({ fair_key: 'acme', batch_key: null, q_fair: 'acme', q_batch: null });
  const given = await skiplock.enqueue({ task: 'fair', payload: { tenant: 'acme' }, fairnessKey: 'override' });
  expect(given.fairnessKey).toBe('override');
  // A task without fairness takes a key given at enqueue; without one its job is plain.
  expect((await skiplock.enqueue({ task: 'plain', payload: { tenant: 'x' }, fairnessKey: 't1' })).fairnessKey).toBe('t1');
  expect((await skiplock.enqueue({ task: 'open', payload: { tenant: 'x' } })).fairnessKey).toBeNull();
  const b = await skiplock.enqueue({ task: 'batched', payload: { tenant: 'x' } });
  expect(await keysOf(b.id)).toEqual({ fair_key: null, batch_key: 'b-x', q_fair: null, q_batch: 'b-x' });
  expect((await skiplock.getJob(b.id))!.batchKey).toBe('b-x');
});

test('several jobs in one enqueue, a debounced one, an event\'s job: each has its keys', async () => {
  const skiplock = make();
  const jobs = (await skiplock.enqueueBatch([
    { task: 'fair', payload: { tenant: 't1' } },
    { task: 'plain', payload: { tenant: 't2' }, fairnessKey: 'given' },
    { task: 'batched', payload: { tenant: 't3' } },
  ])).map((r) => r.job);
  expect(jobs.map((j) => [j.fairnessKey, j.batchKey])).toEqual([['t1', null], ['given', null], [null, 'b-t3']]);
  const debounced = await skiplock.enqueueWithResult({ task: 'fair', payload: { tenant: 'd1' }, debounce: { key: 'k', delayMs: 0 } });
  expect(await keysOf(debounced.job.id)).toMatchObject({ fair_key: 'd1', q_fair: 'd1' });
  // keep 'last' (the default): the new payload's key.
  const again = await skiplock.enqueueWithResult({ task: 'fair', payload: { tenant: 'd2' }, debounce: { key: 'k', delayMs: 0 } });
  expect(again.job.id).toBe(debounced.job.id);
  expect(await keysOf(debounced.job.id)).toMatchObject({ fair_key: 'd2', q_fair: 'd2' });
  const sent = await skiplock.sendEvent({ name: 'signup', data: { tenant: 'ev' } });
  const [row] = await db.sql.query(statement(`SELECT fair_key FROM skiplock.job WHERE task = 'fair' AND idempotency_key LIKE $1`, [`skiplock:event:${sent.id}:%`]));
  expect(row).toEqual({ fair_key: 'ev' });
});

test('a new payload by reschedule brings its own keys', async () => {
  const skiplock = make();
  const job = await skiplock.enqueue({ task: 'fair', payload: { tenant: 'old' }, delayMs: 60_000 });
  const moved = await skiplock.rescheduleJob(job.id, { payload: { tenant: 'new' } });
  expect(moved.fairnessKey).toBe('new');
  expect(await keysOf(job.id)).toMatchObject({ fair_key: 'new', q_fair: 'new' });
  // Without fairness.key, the key the enqueue gave stays.
  const given = await skiplock.enqueue({ task: 'plain', payload: { tenant: 'a' }, fairnessKey: 'kept', delayMs: 60_000 });
  expect((await skiplock.rescheduleJob(given.id, { payload: { tenant: 'b' } })).fairnessKey).toBe('kept');
});

test('bad keys are refused and nothing is written', async () => {
  const skiplock = make();
  const count = async () => Number((await db.sql.query(statement(`SELECT count(*) AS n FROM skiplock.job_record`)))[0]!.n);
  const before = await count();
  await expect(skiplock.enqueue({ task: 'plain', payload: { tenant: 'x' }, fairnessKey: '' })).rejects.toMatchObject({ code: 'invalid_request' });
  await expect(skiplock.enqueue({ task: 'plain', payload: { tenant: 'x' }, fairnessKey: 'x'.repeat(256) })).rejects.toMatchObject({ code: 'invalid_request' });
  await expect(skiplock.enqueue({ task: 'batched', payload: { tenant: 'x' }, fairnessKey: 'k' })).rejects.toThrow(/batches: fairnessKey does not apply/);
  await expect(skiplock.enqueue({ task: 'fair', payload: { tenant: '' } })).rejects.toMatchObject({ code: 'invalid_payload' });
  expect(await count()).toBe(before);
  expect(() => defineTask({ name: 'x', payload, fairness: { key: 'tenant' } as never, handler: () => {} })).toThrow(/fairness.key must be a function/);
  expect(() => defineTask({ name: 'x', payload, fairness: { keys: () => '' } as never, handler: () => {} })).toThrow(/unknown option "keys"/);
});
