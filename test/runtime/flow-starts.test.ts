/**
 * What a rate limit counts (issue 21 items 2 and 6): a start is recorded only for a job the claim
 * really took — never for a row the claim's own statement re-queued, nor for one committed after
 * the statement's snapshot — and once per attempt: a retry is a new start, a resume of the same
 * attempt (after a sleep, a yield, its children's end) is not. A sleeping or waiting job holds no
 * concurrency slot.
 */
import pg from 'pg';
import { afterAll, beforeAll, beforeEach, expect, test } from 'vitest';
import { z } from 'zod';
import { createSkiplock, defineTask, PermanentError } from '../../src/index.ts';
import { flowLimits } from '../../src/runtime/flow/keys.ts';
import { createRegistry } from '../../src/runtime/tasks/task.ts';
import { completeAndClaim } from '../../src/store/claim.ts';
import { statement } from '../../src/store/sql.ts';
import { createTestDb, type TestDb } from '../support/db.ts';

let db: TestDb;
beforeAll(async () => (db = await createTestDb()));
afterAll(() => db.drop());
beforeEach(() => db.emptyJobs('skiplock.flow_start', 'skiplock.flow_cursor', 'skiplock.paused_task'));

const quiet = () => {};
const HOUR = 3_600_000;
const T0 = Date.parse('2033-01-01T00:00:00Z');

async function starts(task: string): Promise<number> {
  const [row] = await db.sql.query<{ n: number }>(statement(`SELECT count(*)::int AS n FROM skiplock.flow_start WHERE task = $1`, [task]));
  return Number(row!.n);
}
async function statuses(task: string): Promise<string[]> {
  const rows = await db.sql.query<{ status: string }>(statement(`SELECT status FROM skiplock.job WHERE task = $1 ORDER BY id`, [task]));
  return rows.map((r) => r.status);
}

test('a retry due at once, re-queued by the statement that claims, is run and counted once: no phantom start', async () => {
  let runs = 0;
  const task = defineTask({
    name: 'flaky-rated',
    payload: z.object({}),
    rateLimit: { limit: 2, periodMs: HOUR },
    backoff: () => 0,
    handler: () => {
      runs += 1;
      if (runs === 1) throw new Error('once');
    },
  });
  const skiplock = createSkiplock({ sql: db.sql, tasks: [task], now: () => new Date(T0), log: quiet });
  await skiplock.enqueue({ task: 'flaky-rated', payload: {} });
  await skiplock.tick({ untilIdle: true, reapIntervalMs: 0 });
  // Two attempts, two starts: the first run and its retry, within one hour's limit of two.
  expect(runs).toBe(2);
  expect(await statuses('flaky-rated')).toEqual(['DONE']);
  expect(await starts('flaky-rated')).toBe(2);
});

test('a job released by a result write is not taken by the claim of the same statement, and costs it no start', async () => {
  const task = defineTask({ name: 'released-rated', payload: z.object({}), rateLimit: { limit: 5, periodMs: HOUR }, handler: () => {} });
  const limits = flowLimits(createRegistry([task]));
  const claim = (results: Parameters<typeof completeAndClaim>[0]['results']) =>
    db.sql.query(completeAndClaim({ now: new Date(T0), workerId: 'w', results, limit: 5, budgetMs: 60_000, tasks: ['released-rated'], leaseMs: 30_000, leaseGraceMs: 0, flowLimits: limits }));
  const skiplock = createSkiplock({ sql: db.sql, tasks: [task], now: () => new Date(T0), log: quiet });
  await skiplock.enqueueBatch([{ task: 'released-rated', payload: {} }, { task: 'released-rated', payload: {} }]);
  const first = (await claim([])).filter((r) => r.id !== null);
  expect(first).toHaveLength(2);
  expect(await starts('released-rated')).toBe(2);
  // One is released (the attempt given back), the other's result is written: the release is not
  // claimed by this statement, and no start is recorded for it.
  const [a, b] = first;
  const rows = await claim([
    { id: String(a!.id), attempt: 1, status: 'QUEUED', result: null, error: 'stopped', delay_ms: 0, release: true },
    { id: String(b!.id), attempt: 1, status: 'DONE', result: null, error: null, delay_ms: 0, release: false },
  ]);
  expect(rows.filter((r) => r.id !== null)).toHaveLength(0);
  expect(await starts('released-rated')).toBe(2);
  // The next claim takes it: the same attempt again, so no new start either.
  expect((await claim([])).filter((r) => r.id !== null).map((r) => String(r.id))).toEqual([String(a!.id)]);
  expect(await starts('released-rated')).toBe(2);
});

test('a due job committed while a claim waited for the global lock is not counted by that claim, and runs', async () => {
  const task = defineTask({
    name: 'late-rated',
    payload: z.object({ k: z.string() }),
    concurrency: { limit: 5, key: (p) => p.k, globalLimit: 10 },
    rateLimit: { limit: 1, periodMs: HOUR },
    handler: () => {},
  });
  const skiplock = createSkiplock({ sql: db.sql, tasks: [task], log: quiet });
  // Some other job: on an empty table the claim's UPDATE would never call the limited claim at all.
  await skiplock.enqueue({ task: 'late-rated', payload: { k: 'b' }, runAt: new Date(Date.now() + HOUR) });
  const holder = new pg.Client({ connectionString: db.url });
  await holder.connect();
  try {
    await holder.query('BEGIN');
    await holder.query(`SELECT pg_advisory_xact_lock(hashtextextended('skiplock/g/late-rated', 0))`);
    // The claim takes its snapshot, then waits for the task's global lock.
    const claiming = db.sql.query(completeAndClaim({
      now: null, workerId: 'w', results: [], limit: 5, budgetMs: 60_000, tasks: ['late-rated'], leaseMs: 30_000, leaseGraceMs: 0,
      flowLimits: flowLimits(createRegistry([task])),
    }));
    await new Promise((resolve) => setTimeout(resolve, 300));
    await skiplock.enqueue({ task: 'late-rated', payload: { k: 'a' }, runAt: new Date(Date.now() - 60_000) });
    await holder.query('COMMIT');
    const rows = await claiming;
    // Invisible to the claim's UPDATE (committed after its snapshot): neither taken nor counted.
    expect(rows.filter((r) => r.id !== null)).toHaveLength(0);
    expect(await starts('late-rated')).toBe(0);
  } finally {
    await holder.end();
  }
  await skiplock.tick({ untilIdle: true, reapIntervalMs: 0 });
  expect(await statuses('late-rated')).toEqual(['QUEUED', 'DONE']);
  expect(await starts('late-rated')).toBe(1);
});

test('one claim across many concurrency keys sharing one rate key starts no more than the rate allows', async () => {
  const task = defineTask({
    name: 'shared-rate',
    payload: z.object({ tenant: z.string() }),
    concurrency: { limit: 5, key: (p) => p.tenant },
    rateLimit: { limit: 3, periodMs: HOUR },
    handler: () => {},
  });
  const skiplock = createSkiplock({ sql: db.sql, tasks: [task], now: () => new Date(T0), log: quiet });
  await skiplock.enqueueBatch(Array.from({ length: 20 }, (_, i) => ({ task: 'shared-rate', payload: { tenant: `t${i % 10}` } })));
  const rows = await db.sql.query(completeAndClaim({
    now: new Date(T0), workerId: 'w', results: [], limit: 20, budgetMs: 60_000, tasks: ['shared-rate'], leaseMs: 30_000, leaseGraceMs: 0,
    flowLimits: flowLimits(createRegistry([task])),
  }));
  expect(rows.filter((r) => r.id !== null)).toHaveLength(3);
  expect(await starts('shared-rate')).toBe(3);
});

test('a 1 s sleep under rateLimit {limit: 2, periodMs: 60 s} resumes after about 1 s: a resume is no new start', async () => {
  let now = T0;
  const resumed: number[] = [];
  const task = defineTask({
    name: 'sleepy-rated',
    payload: z.object({ n: z.number() }),
    rateLimit: { limit: 2, periodMs: 60_000 },
    handler: async (_p, ctx) => {
      await ctx.sleep('nap', 1_000);
      resumed.push(now - T0);
    },
  });
  const skiplock = createSkiplock({ sql: db.sql, tasks: [task], now: () => new Date(now), log: quiet });
  await skiplock.enqueueBatch([0, 1, 2].map((n) => ({ task: 'sleepy-rated', payload: { n } })));
  await skiplock.tick({ untilIdle: true, reapIntervalMs: 0 });
  // Two started (the limit), both asleep; the third waits for the window.
  expect(await statuses('sleepy-rated')).toEqual(['WAITING', 'WAITING', 'QUEUED']);
  expect(await starts('sleepy-rated')).toBe(2);
  // The ticker wakes for the sleepers (the Durable Object alarm): at 1 s, not when the window opens.
  expect(await skiplock.msUntilNextWork()).toBe(1_000);
  now = T0 + 1_100;
  // Due, not yet claimed: the full window holds back only the job that has not started.
  const ids = (await db.sql.query<{ id: string }>(statement(`SELECT id::text AS id FROM skiplock.job WHERE task = 'sleepy-rated' ORDER BY id`))).map((r) => r.id);
  expect((await skiplock.flowWait(ids[0]!))?.rate).toBeNull();
  expect((await skiplock.flowWait(ids[2]!))?.rate).toMatchObject({ starts: 2, limit: 2 });
  expect((await skiplock.flowStatus()).byTask['sleepy-rated']?.waiting).toBe(1);
  await skiplock.tick({ untilIdle: true, reapIntervalMs: 0 });
  expect(resumed).toEqual([1_100, 1_100]);
  expect(await statuses('sleepy-rated')).toEqual(['DONE', 'DONE', 'QUEUED']);
  expect(await starts('sleepy-rated')).toBe(2);
  // The third starts when the window opens, not before.
  now = T0 + 59_999;
  await skiplock.tick({ untilIdle: true, reapIntervalMs: 0 });
  expect(await statuses('sleepy-rated')).toEqual(['DONE', 'DONE', 'QUEUED']);
  now = T0 + 60_000;
  await skiplock.tick({ untilIdle: true, reapIntervalMs: 0 });
  now = T0 + 61_100;
  await skiplock.tick({ untilIdle: true, reapIntervalMs: 0 });
  expect(await statuses('sleepy-rated')).toEqual(['DONE', 'DONE', 'DONE']);
});

test('a parent woken by its child resumes under a rate limit its start already filled', async () => {
  const child = defineTask({ name: 'rated-child', payload: z.object({}), handler: () => 'ok' });
  const parent = defineTask({
    name: 'rated-parent',
    payload: z.object({}),
    rateLimit: { limit: 1, periodMs: HOUR },
    handler: async (_p, ctx) => ctx.invoke('c', 'rated-child', {}),
  });
  const skiplock = createSkiplock({ sql: db.sql, tasks: [child, parent], now: () => new Date(T0), log: quiet });
  await skiplock.enqueue({ task: 'rated-parent', payload: {} });
  await skiplock.tick({ untilIdle: true, reapIntervalMs: 0 });
  await skiplock.tick({ untilIdle: true, reapIntervalMs: 0 });
  expect(await statuses('rated-parent')).toEqual(['DONE']);
  expect(await starts('rated-parent')).toBe(1);
});

test('a person\'s retry of a DEAD job is a new start, even when it died at its first attempt', async () => {
  let runs = 0;
  const task = defineTask({
    name: 'dies-rated',
    payload: z.object({}),
    rateLimit: { limit: 5, periodMs: HOUR },
    handler: () => {
      runs += 1;
      if (runs === 1) throw new PermanentError('no');
    },
  });
  const skiplock = createSkiplock({ sql: db.sql, tasks: [task], now: () => new Date(T0), log: quiet });
  const job = await skiplock.enqueue({ task: 'dies-rated', payload: {} });
  await skiplock.tick({ untilIdle: true, reapIntervalMs: 0 });
  expect(await statuses('dies-rated')).toEqual(['DEAD']);
  await skiplock.retryJob(job.id);
  await skiplock.tick({ untilIdle: true, reapIntervalMs: 0 });
  expect(await statuses('dies-rated')).toEqual(['DONE']);
  expect(await starts('dies-rated')).toBe(2);
});

test('a sleeping job holds no concurrency slot: another job of its key runs meanwhile, and the sleeper resumes when a slot is free', async () => {
  let now = T0;
  const ran: string[] = [];
  const task = defineTask({
    name: 'sleepy-slot',
    payload: z.object({ n: z.string() }),
    concurrency: { limit: 1 },
    handler: async (p, ctx) => {
      if (p.n === 'sleeper') await ctx.sleep('nap', 1_000);
      ran.push(p.n);
    },
  });
  const skiplock = createSkiplock({ sql: db.sql, tasks: [task], now: () => new Date(now), log: quiet });
  await skiplock.enqueue({ task: 'sleepy-slot', payload: { n: 'sleeper' }, priority: 5 });
  await skiplock.enqueue({ task: 'sleepy-slot', payload: { n: 'other' } });
  await skiplock.tick({ untilIdle: true, reapIntervalMs: 0 });
  expect(ran).toEqual(['other']);
  now = T0 + 1_100;
  await skiplock.tick({ untilIdle: true, reapIntervalMs: 0 });
  expect(ran).toEqual(['other', 'sleeper']);
});
