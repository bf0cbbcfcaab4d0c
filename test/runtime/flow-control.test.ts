/**
 * Issue 14 items 3, 4 and 6: debounced enqueues, pausing a task, rescheduling a job — against
 * real PostgreSQL, with concurrent callers where the guarantee is about races.
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

const T0 = Date.parse('2030-01-01T00:00:00Z');

function setup(handler: (p: { v: number | string }, name: string) => void = () => {}) {
  let clockMs = T0;
  const tasks = ['deb', 'pa', 'pb', 'res'].map((name) =>
    defineTask({ name, payload: z.object({ v: z.union([z.number(), z.string()]) }), handler: (p) => handler(p, name) }),
  );
  const skiplock = createSkiplock({ sql: db.sql, tasks, log: () => {}, now: () => new Date(clockMs), retention: false });
  return { skiplock, at: (ms: number) => (clockMs = T0 + ms) };
}

test('debounce: 50 concurrent enqueues with one key make one job, last payload by default', async () => {
  const { skiplock } = setup();
  const results = await Promise.all(
    Array.from({ length: 50 }, (_, i) => skiplock.enqueueWithResult({ task: 'deb', payload: { v: i }, debounce: { key: 'k-last', delayMs: 1000 } })),
  );
  const ids = new Set(results.map((r) => r.job.id));
  expect(ids.size).toBe(1);
  expect(results.filter((r) => r.created)).toHaveLength(1);
  const rows = await db.sql.query(statement(`SELECT payload FROM skiplock.job WHERE debounce_key = 'k-last'`));
  expect(rows).toHaveLength(1);
  // keep 'last': each enqueue wrote its own payload (its answer shows it), so the job holds the
  // payload of whichever committed last: one of them, whole.
  for (const [i, r] of results.entries()) expect(r.job.payload).toEqual({ v: i });
  expect(results.map((r) => r.job.payload)).toContainEqual(rows[0]!.payload);
});

test('debounce keep first: 50 concurrent enqueues keep the payload of the one that created the job', async () => {
  const { skiplock } = setup();
  const results = await Promise.all(
    Array.from({ length: 50 }, (_, i) => skiplock.enqueueWithResult({ task: 'deb', payload: { v: i }, debounce: { key: 'k-first', delayMs: 1000, keep: 'first' } })),
  );
  const created = results.filter((r) => r.created);
  expect(created).toHaveLength(1);
  const job = await skiplock.getJob(created[0]!.job.id);
  expect(job!.payload).toEqual(created[0]!.job.payload);
  for (const r of results) expect(r.job.payload).toEqual(created[0]!.job.payload);
});

test('debounce keep last: the replaced payload brings its own flow keys, so its concurrency key and rate key are the new ones', async () => {
  const task = defineTask({
    name: 'deb-keys',
    payload: z.object({ k: z.string() }),
    concurrency: { limit: 1, key: (p) => p.k },
    rateLimit: { limit: 5, periodMs: 60_000, key: (p) => `rate-${p.k}` },
    handler: () => {},
  });
  const skiplock = createSkiplock({ sql: db.sql, tasks: [task], log: () => {}, retention: false });
  await skiplock.enqueueWithResult({ task: 'deb-keys', payload: { k: 'A' }, debounce: { key: 'd', delayMs: 0 } });
  const last = await skiplock.enqueueWithResult({ task: 'deb-keys', payload: { k: 'B' }, debounce: { key: 'd', delayMs: 0 } });
  const [row] = await db.sql.query(statement(`SELECT payload, flow_key, rate_key FROM skiplock.job WHERE id = $1`, [last.job.id]));
  expect(row).toEqual({ payload: { k: 'B' }, flow_key: 'B', rate_key: 'rate-B' });
  // keep 'first' keeps the first payload's keys with it.
  await skiplock.enqueueWithResult({ task: 'deb-keys', payload: { k: 'C' }, debounce: { key: 'e', delayMs: 0, keep: 'first' } });
  const kept = await skiplock.enqueueWithResult({ task: 'deb-keys', payload: { k: 'D' }, debounce: { key: 'e', delayMs: 0, keep: 'first' } });
  const [firstRow] = await db.sql.query(statement(`SELECT payload, flow_key, rate_key FROM skiplock.job WHERE id = $1`, [kept.job.id]));
  expect(firstRow).toEqual({ payload: { k: 'C' }, flow_key: 'C', rate_key: 'rate-C' });
});

test('debounce pushes run_at to now + delayMs, never past first enqueue + maxDelayMs; a new job once claimed', async () => {
  const ran: unknown[] = [];
  const { skiplock, at } = setup((p, name) => void (name === 'deb' && ran.push(p.v)));
  const debounce = { key: 'k-max', delayMs: 10_000, maxDelayMs: 25_000 };
  at(0);
  const first = await skiplock.enqueue({ task: 'deb', payload: { v: 'a' }, debounce });
  expect(first.runAt.getTime()).toBe(T0 + 10_000);
  at(8_000);
  const second = await skiplock.enqueue({ task: 'deb', payload: { v: 'b' }, debounce });
  expect(second.id).toBe(first.id);
  expect(second.runAt.getTime()).toBe(T0 + 18_000);
  at(17_000);
  const third = await skiplock.enqueue({ task: 'deb', payload: { v: 'c' }, debounce });
  expect(third.runAt.getTime()).toBe(T0 + 25_000); // capped by maxDelayMs
  expect(third.payload).toEqual({ v: 'c' });
  at(25_000);
  await skiplock.tick({ untilIdle: true });
  expect(ran).toContain('c');
  expect((await skiplock.getJob(first.id))!.status).toBe('DONE');
  const next = await skiplock.enqueue({ task: 'deb', payload: { v: 'd' }, debounce });
  expect(next.id).not.toBe(first.id);
});

test('debounce: a retry-waiting job (it ran) is not updated, and its return to QUEUED does not collide', async () => {
  let fail = true;
  const { skiplock, at } = setup((_p, name) => {
    if (name === 'deb' && fail) throw new Error('transient');
  });
  at(100_000);
  const debounce = { key: 'k-retry', delayMs: 0 };
  const first = await skiplock.enqueue({ task: 'deb', payload: { v: 1 }, debounce });
  await skiplock.tick({ untilIdle: true });
  const retrying = await skiplock.getJob(first.id);
  expect(retrying!.status).toBe('QUEUED');
  expect(retrying!.attempts).toBe(1);
  const second = await skiplock.enqueue({ task: 'deb', payload: { v: 2 }, debounce });
  expect(second.id).not.toBe(first.id);
  fail = false;
  at(200_000);
  await skiplock.tick({ untilIdle: true });
  expect((await skiplock.getJob(first.id))!.status).toBe('DONE');
  expect((await skiplock.getJob(second.id))!.status).toBe('DONE');
});

test('debounce is refused with runAt, delayMs, idempotencyKey, and in a batch', async () => {
  const { skiplock } = setup();
  const debounce = { key: 'x', delayMs: 1 };
  for (const extra of [{ delayMs: 5 }, { runAt: new Date() }, { idempotencyKey: 'i' }])
    await expect(skiplock.enqueue({ task: 'deb', payload: { v: 1 }, debounce, ...extra })).rejects.toMatchObject({ code: 'invalid_request' });
  await expect(skiplock.enqueueBatch([{ task: 'deb', payload: { v: 1 }, debounce }])).rejects.toMatchObject({ code: 'invalid_request' });
  await expect(skiplock.enqueue({ task: 'deb', payload: { v: 1 }, debounce: { key: '', delayMs: 1 } })).rejects.toMatchObject({ code: 'invalid_request' });
});

test('pause under running ticks: nothing of the task is claimed once the pause has committed; resume picks up', async () => {
  const { skiplock, at } = setup();
  at(300_000);
  await skiplock.enqueueBatch(Array.from({ length: 400 }, (_, i) => ({ task: 'pa', payload: { v: i } })));
  await skiplock.enqueueBatch(Array.from({ length: 400 }, (_, i) => ({ task: 'pb', payload: { v: i } })));
  const started = () => db.sql.query<{ n: number }>(statement(`SELECT count(*)::int AS n FROM skiplock.job WHERE task = 'pa' AND attempts > 0`));
  let stop = false;
  const iterations = [0, 0, 0, 0, 0, 0];
  const loops = iterations.map(async (_, i) => {
    while (!stop) {
      await skiplock.tick({ concurrency: 5, workerName: `w${i}`, untilIdle: true });
      iterations[i]! += 1;
    }
  });
  while ((await started())[0]!.n === 0) await new Promise((resolve) => setTimeout(resolve, 5));
  const paused = await skiplock.pauseTask('pa');
  expect(paused.state).toBe('paused');
  // Every loop finishes the tick it was in (whose claim may predate the pause), then one more.
  const mark = [...iterations];
  while (iterations.some((n, i) => n < mark[i]! + 2)) await new Promise((resolve) => setTimeout(resolve, 5));
  const before = (await started())[0]!.n;
  const markB = [...iterations];
  while (iterations.some((n, i) => n < markB[i]! + 3)) await new Promise((resolve) => setTimeout(resolve, 5));
  expect((await started())[0]!.n).toBe(before);
  expect(before).toBeLessThan(400);
  // The other task goes on; the wake-up ignores the paused one.
  while ((await skiplock.listTasks()).find((t) => t.name === 'pb')!.counts.QUEUED > 0) await new Promise((resolve) => setTimeout(resolve, 5));
  stop = true;
  await Promise.all(loops);
  expect(await skiplock.msUntilNextWork()).toBeNull();
  const tasks = await skiplock.listTasks();
  expect(tasks.find((t) => t.name === 'pa')).toMatchObject({ state: 'paused', counts: { QUEUED: 400 - before, DONE: before } });

  const resumed = await skiplock.resumeTask('pa');
  expect(resumed.state).toBe('active');
  expect(await skiplock.msUntilNextWork()).toBe(0);
  await skiplock.tick({ untilIdle: true });
  expect((await skiplock.listTasks()).find((t) => t.name === 'pa')!.counts).toMatchObject({ QUEUED: 0, DONE: 400 });
  // Idempotent both ways; a bad name is invalid_request.
  await skiplock.resumeTask('pa');
  await skiplock.pauseTask('pa');
  await skiplock.pauseTask('pa');
  await skiplock.resumeTask('pa');
  await expect(skiplock.pauseTask('')).rejects.toMatchObject({ code: 'invalid_request' });
});

test('reschedule: time, payload, priority of a QUEUED job; 409 otherwise; an invalid payload writes nothing', async () => {
  const { skiplock, at } = setup();
  at(400_000);
  const job = await skiplock.enqueue({ task: 'res', payload: { v: 'old' }, delayMs: 60_000 });
  const moved = await skiplock.rescheduleJob(job.id, { delayMs: 0, priority: 7 });
  expect(moved.runAt.getTime()).toBe(T0 + 400_000);
  expect(moved.priority).toBe(7);
  expect(moved.payload).toEqual({ v: 'old' });
  const runAt = new Date(T0 + 500_000);
  const changed = await skiplock.rescheduleJob(job.id, { runAt, payload: { v: 'new' } });
  expect(changed.runAt.getTime()).toBe(runAt.getTime());
  expect(changed.payload).toEqual({ v: 'new' });
  await expect(skiplock.rescheduleJob(job.id, { payload: { v: true } })).rejects.toMatchObject({ code: 'invalid_payload' });
  await expect(skiplock.rescheduleJob(job.id, { payload: { v: 'x' }, delayMs: 1, runAt })).rejects.toMatchObject({ code: 'invalid_request' });
  await expect(skiplock.rescheduleJob(job.id, {})).rejects.toMatchObject({ code: 'invalid_request' });
  expect(await skiplock.getJob(job.id)).toEqual(changed);
  await expect(skiplock.rescheduleJob('999999999', { delayMs: 0 })).rejects.toMatchObject({ code: 'not_found' });
  await expect(skiplock.rescheduleJob('nope', { delayMs: 0 })).rejects.toMatchObject({ code: 'not_found' });
  at(500_000);
  await skiplock.tick({ untilIdle: true });
  await expect(skiplock.rescheduleJob(job.id, { delayMs: 0 })).rejects.toMatchObject({ code: 'conflict' });
  await expect(skiplock.rescheduleJob(job.id, { payload: { v: 1 } })).rejects.toMatchObject({ code: 'conflict' });
});

test('reschedule racing claims: either the claim wins (409) or the new payload and time are what runs, never a mix', async () => {
  const ran = new Map<string, unknown>();
  let clockMs = T0 + 600_000;
  const tasks = [defineTask({ name: 'race', payload: z.object({ v: z.string() }), handler: (p, ctx) => void ran.set(ctx.job.id, p.v) })];
  const skiplock = createSkiplock({ sql: db.sql, tasks, log: () => {}, now: () => new Date(clockMs), retention: false });
  const jobs = (await skiplock.enqueueBatch(Array.from({ length: 300 }, () => ({ task: 'race', payload: { v: 'old' } })))).map((r) => r.job);
  let stop = false;
  const loops = Array.from({ length: 4 }, async (_, i) => {
    while (!stop) await skiplock.tick({ concurrency: 3, workerName: `r${i}`, untilIdle: true });
  });
  const outcomes = await Promise.all(
    jobs.map(async (job, i) => {
      await new Promise((resolve) => setTimeout(resolve, i % 50));
      try {
        await skiplock.rescheduleJob(job.id, { payload: { v: 'new' }, priority: 1 });
        return 'moved';
      } catch (error) {
        expect(error).toMatchObject({ code: 'conflict' });
        return 'claimed';
      }
    }),
  );
  while ((await skiplock.listTasks()).find((t) => t.name === 'race')!.counts.DONE < jobs.length) await new Promise((resolve) => setTimeout(resolve, 10));
  stop = true;
  await Promise.all(loops);
  clockMs += 0;
  for (const [i, job] of jobs.entries()) {
    const final = (await skiplock.getJob(job.id))!;
    expect(ran.get(job.id), job.id).toBe(outcomes[i] === 'moved' ? 'new' : 'old');
    expect(final.payload).toEqual({ v: outcomes[i] === 'moved' ? 'new' : 'old' });
    expect(final.priority).toBe(outcomes[i] === 'moved' ? 1 : 0);
  }
  expect(outcomes).toContain('moved');
});

test('a paused task\'s schedules keep firing into the queue; its jobs wait for resume', async () => {
  let clockMs = T0 + 900_000;
  const ran: unknown[] = [];
  const tasks = [defineTask({ name: 'cronned', payload: z.object({}), handler: () => void ran.push(1) })];
  const skiplock = createSkiplock({ sql: db.sql, tasks, log: () => {}, now: () => new Date(clockMs), retention: false });
  await skiplock.pauseTask('cronned');
  await skiplock.putSchedule('every-minute', { every: 60_000, task: 'cronned', catchUp: 'all' });
  for (let i = 0; i < 3; i++) {
    clockMs += 60_000;
    await skiplock.tick({ untilIdle: true });
  }
  const queued = (await skiplock.listTasks()).find((t) => t.name === 'cronned')!;
  expect(queued.counts.QUEUED).toBeGreaterThanOrEqual(2);
  expect(ran).toHaveLength(0);
  await skiplock.resumeTask('cronned');
  await skiplock.tick({ untilIdle: true });
  expect(ran.length).toBe(queued.counts.QUEUED);
});
