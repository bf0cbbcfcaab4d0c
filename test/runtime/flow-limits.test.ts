/**
 * Flow control (issue 14 items 1, 2): per-key concurrency limits and sliding-window rate limits,
 * exact under parallel ticks. A trigger records every status change in the order the statements
 * made them (a sequence drawn inside the writing transaction); replaying that log, no key ever
 * has more RUNNING jobs than its limit. The claim of a key counts only after the commit of every
 * claim and release it could depend on, so the sequence order is the order that matters.
 */
import { afterAll, beforeAll, expect, test } from 'vitest';
import { z } from 'zod';
import { createSkiplock, defineTask, type Skiplock } from '../../src/index.ts';
import { createPgDriver } from '../../src/store/drivers/pg.ts';
import { completeAndClaim } from '../../src/store/claim.ts';
import { statement } from '../../src/store/sql.ts';
import { flowLimits } from '../../src/runtime/flow/keys.ts';
import { createRegistry } from '../../src/runtime/tasks/task.ts';
import { createTestDb, type TestDb } from '../support/db.ts';

let db: TestDb;
beforeAll(async () => {
  db = await createTestDb();
  await db.sql.batch([
    statement(`CREATE TABLE status_change (seq bigserial PRIMARY KEY, id bigint, task text, flow_key text, old text, new text NOT NULL, rate_key text, at timestamptz)`),
    statement(`CREATE FUNCTION record_status_change() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        -- A live job's status is its queue row's (migration 021); its end deletes that row.
        IF TG_OP = 'DELETE' THEN
          INSERT INTO status_change (id, task, flow_key, old, new, rate_key, at)
          VALUES (OLD.id, OLD.task, OLD.flow_key, OLD.status, 'ENDED', OLD.rate_key, OLD.updated_at);
          RETURN OLD;
        END IF;
        IF TG_OP = 'INSERT' OR OLD.status IS DISTINCT FROM NEW.status THEN
          INSERT INTO status_change (id, task, flow_key, old, new, rate_key, at)
          VALUES (NEW.id, NEW.task, NEW.flow_key, CASE WHEN TG_OP = 'UPDATE' THEN OLD.status END, NEW.status, NEW.rate_key, NEW.updated_at);
        END IF;
        RETURN NEW;
      END $$`),
    statement(`CREATE TRIGGER record_status_change AFTER INSERT OR UPDATE OR DELETE ON skiplock.queue
      FOR EACH ROW EXECUTE FUNCTION record_status_change()`),
  ]);
});
afterAll(() => db.drop());

const quiet = () => {};
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The most jobs of a task RUNNING at once, per key and over all keys, replaying the log in order. */
async function peaks(task: string) {
  const rows = await db.sql.query<{ flow_key: string; old: string | null; new: string }>(
    statement(`SELECT flow_key, old, new FROM status_change WHERE task = $1 ORDER BY seq`, [task]),
  );
  const running = new Map<string, number>();
  let total = 0;
  let peakTotal = 0;
  let peakKey = 0;
  for (const row of rows) {
    const delta = (row.new === 'RUNNING' ? 1 : 0) - (row.old === 'RUNNING' ? 1 : 0);
    if (delta === 0) continue;
    const n = (running.get(row.flow_key) ?? 0) + delta;
    running.set(row.flow_key, n);
    total += delta;
    peakKey = Math.max(peakKey, n);
    peakTotal = Math.max(peakTotal, total);
  }
  return { peakKey, peakTotal, changes: rows.length };
}

test('defineTask checks concurrency and rateLimit', () => {
  const base = { name: 't', payload: z.object({ k: z.string() }), handler: () => {} };
  expect(() => defineTask({ ...base, concurrency: { limit: 0 } })).toThrow(/concurrency.limit must be an integer from 1/);
  expect(() => defineTask({ ...base, concurrency: { limit: 1.5 } })).toThrow(/concurrency.limit/);
  expect(() => defineTask({ ...base, concurrency: { limit: 2, globalLimit: 5 } })).toThrow(/globalLimit needs concurrency.key/);
  expect(() => defineTask({ ...base, concurrency: { limit: 2, key: (p) => p.k, globalLimit: 0 } })).toThrow(/globalLimit must be/);
  expect(() => defineTask({ ...base, concurrency: { limit: 2, key: 'k' as never } })).toThrow(/concurrency.key must be a function/);
  expect(() => defineTask({ ...base, concurrency: { limit: 2, keys: 1 } as never })).toThrow(/unknown option "keys"/);
  expect(() => defineTask({ ...base, rateLimit: { limit: 10 } as never })).toThrow(/rateLimit.periodMs must be an integer/);
  expect(() => defineTask({ ...base, rateLimit: { limit: 10, periodMs: 0 } })).toThrow(/rateLimit.periodMs/);
  expect(() => defineTask({ ...base, rateLimit: { limit: -1, periodMs: 1000 } })).toThrow(/rateLimit.limit/);
  expect(() => defineTask({ ...base, rateLimit: 5 as never })).toThrow(/rateLimit must be/);
  expect(defineTask({ ...base, concurrency: { limit: 1, key: (p) => p.k }, rateLimit: { limit: 10, periodMs: 1000 } }).name).toBe('t');
});

test('a key that is not a 1–255 character string refuses the enqueue, writing nothing', async () => {
  const task = defineTask({ name: 'badkey', payload: z.object({ k: z.string() }), concurrency: { limit: 1, key: (p) => p.k }, handler: () => {} });
  const skiplock = createSkiplock({ sql: db.sql, tasks: [task], log: quiet });
  await expect(skiplock.enqueueBatch([{ task: 'badkey', payload: { k: 'a' } }, { task: 'badkey', payload: { k: '' } }])).rejects.toMatchObject({
    code: 'invalid_payload',
    issues: [{ path: ['jobs', 1, 'payload'], message: 'concurrency.key must return 1–255 characters' }],
  });
  expect(await db.sql.query(statement(`SELECT 1 FROM skiplock.job WHERE task = 'badkey'`))).toHaveLength(0);
  const job = await skiplock.enqueue({ task: 'badkey', payload: { k: 'tenant-1' } });
  const [row] = await db.sql.query(statement(`SELECT flow_key, rate_key FROM skiplock.job WHERE id = $1`, [job.id]));
  expect(row).toEqual({ flow_key: 'tenant-1', rate_key: '' });
});

// Without a global limit, claims of different keys run in parallel (only the per-key lock orders
// them); with one, every claim of the task takes its lock: each case proves its own lock.
test.each([
  { name: 'tenant-work', global: 25 },
  { name: 'tenant-work-keys-only', global: undefined },
])('per-key (and global: $global) concurrency hold under 50 parallel tick loops, with workers killed mid-job and the reaper', async ({ name, global }) => {
  const KEYS = 20;
  const PER_KEY = 3;
  const GLOBAL = global ?? Infinity;
  const JOBS = 12 * KEYS;
  let ran = 0;
  const task = defineTask({
    name,
    payload: z.object({ tenant: z.string() }),
    timeoutMs: 2_000,
    concurrency: { limit: PER_KEY, key: (p) => p.tenant, ...(global ? { globalLimit: global } : {}) },
    handler: async () => {
      ran += 1;
      await sleep(Math.random() * 15);
    },
  });
  const plain = defineTask({ name: `${name}-plain`, payload: z.object({}), handler: () => sleep(Math.random() * 5) });
  // A pool of its own, one connection per loop and two to spare: 50 claimers at the database at once.
  const LOOPS = 50;
  const pool = createPgDriver(db.url, { max: LOOPS + 2 });
  const skiplock = createSkiplock({ sql: pool, tasks: [task, plain], log: quiet });
  await skiplock.enqueueBatch(Array.from({ length: JOBS }, (_, i) => ({ task: name, payload: { tenant: `t${i % KEYS}` } })));
  await (skiplock as Skiplock).enqueueBatch(Array.from({ length: 100 }, () => ({ task: `${name}-plain`, payload: {} })));

  // Killed workers: claims whose worker never comes back (short lease); the ticks' reaper returns them.
  const limits = flowLimits(createRegistry([task]));
  let killed = 0;
  const kill = async () => {
    for (let i = 0; i < 6; i++) {
      const rows = await db.sql.query(completeAndClaim({
        now: null, workerId: `killed-${i}`, results: [], limit: 4, budgetMs: 60_000, tasks: [name],
        leaseMs: 150, leaseGraceMs: 0, flowLimits: limits,
      }));
      killed += rows.filter((r) => r.id !== null).length;
      await sleep(40);
    }
  };

  const loops = Array.from({ length: LOOPS }, async () => {
    for (let round = 0; round < 400; round++) {
      await skiplock.tick({ untilIdle: true, concurrency: 4, pollIntervalMs: 10, reapIntervalMs: 50, budgetMs: 20_000 });
      const [left] = await db.sql.query<{ n: number }>(statement(`SELECT count(*)::int AS n FROM skiplock.job WHERE status <> 'DONE' AND task IN ($1, $2)`, [name, `${name}-plain`]));
      if (Number(left!.n) === 0) return;
      await sleep(20);
    }
  });
  await Promise.all([...loops, kill()]);
  await pool.close();

  expect(killed).toBeGreaterThan(0);
  const [counts] = await db.sql.query(statement(`SELECT count(*) FILTER (WHERE status = 'DONE')::int AS done, count(*)::int AS all FROM skiplock.job WHERE task = $1`, [name]));
  expect(counts).toEqual({ done: JOBS, all: JOBS });
  const p = await peaks(name);
  expect(p.peakKey).toBe(PER_KEY); // reached, never exceeded
  if (global) expect(p.peakTotal).toBe(GLOBAL);
  else expect(p.peakTotal).toBeGreaterThan(25);
  expect(ran).toBeGreaterThanOrEqual(JOBS);
}, 120_000);

test('a full key does not block other keys or plain tasks', async () => {
  const task = defineTask({ name: 'hol', payload: z.object({ k: z.string() }), concurrency: { limit: 1, key: (p) => p.k }, priority: 5, handler: () => {} });
  const plain = defineTask({ name: 'hol-plain', payload: z.object({}), handler: () => {} });
  const skiplock = createSkiplock({ sql: db.sql, tasks: [task, plain], log: quiet });
  // 50 jobs of key a, ahead of everything, then one of key b and one plain job.
  await skiplock.enqueueBatch(Array.from({ length: 50 }, () => ({ task: 'hol', payload: { k: 'a' }, priority: 10 })));
  await skiplock.enqueueBatch([{ task: 'hol', payload: { k: 'b' } }, { task: 'hol-plain' }]);
  const rows = await db.sql.query(completeAndClaim({
    now: null, workerId: 'w', results: [], limit: 10, budgetMs: 60_000, tasks: ['hol', 'hol-plain'], leaseMs: 30_000, leaseGraceMs: 0,
    flowLimits: flowLimits(createRegistry([task, plain])),
  }));
  const claimed = rows.filter((r) => r.id !== null).map((r) => `${r.task}:${r.flow_key ?? ''}`).sort();
  expect(claimed).toEqual(['hol-plain:', 'hol:a', 'hol:b']);
});

test('rate limit 10/s per key over a simulated minute with parallel ticks: no 1 s window holds more than 10 starts, and each key reaches 10/s', async () => {
  const KEYS = 5;
  const LIMIT = 10;
  const PERIOD = 1_000;
  const T0 = Date.parse('2030-01-01T00:00:00Z');
  let clock = T0;
  const task = defineTask({
    name: 'api-call',
    payload: z.object({ account: z.string() }),
    rateLimit: { limit: LIMIT, periodMs: PERIOD, key: (p) => p.account },
    handler: () => {},
  });
  const skiplock = createSkiplock({ sql: db.sql, tasks: [task], now: () => new Date(clock), log: quiet });
  // More than a minute can take: 700 per key at 10/s.
  for (let k = 0; k < KEYS; k++)
    await skiplock.enqueueBatch(Array.from({ length: 700 }, () => ({ task: 'api-call', payload: { account: `a${k}` } })));
  // The simulated clock advances 100 ms per step; 6 ticks claim in parallel at each step.
  const STEP = 100;
  for (clock = T0; clock < T0 + 60_000; clock += STEP) {
    await Promise.all(Array.from({ length: 6 }, () => skiplock.tick({ untilIdle: true, concurrency: 7, reapIntervalMs: 0 })));
  }
  // Each start: the claim's clock, as the trigger saw the job become RUNNING.
  const starts = await db.sql.query<{ rate_key: string; ms: string }>(
    statement(`SELECT rate_key, (extract(epoch FROM at) * 1000)::bigint::text AS ms FROM status_change
                WHERE task = 'api-call' AND new = 'RUNNING' ORDER BY at`),
  );
  const byKey = new Map<string, number[]>();
  for (const s of starts) byKey.set(s.rate_key, [...(byKey.get(s.rate_key) ?? []), Number(s.ms)]);
  expect(byKey.size).toBe(KEYS);
  for (const [key, times] of byKey) {
    times.sort((a, b) => a - b);
    // Any window [s, s + PERIOD) holds at most LIMIT starts: the LIMIT-th next start is ≥ PERIOD later.
    for (let i = 0; i + LIMIT < times.length; i++) expect(times[i + LIMIT]! - times[i]!, `key ${key} at start ${i}`).toBeGreaterThanOrEqual(PERIOD);
    // Throughput reaches the limit: 10 per second for the whole simulated minute.
    expect(times.length, `key ${key}`).toBe(LIMIT * 60);
  }
  // The jobs over the limit were not touched: QUEUED, no attempt spent.
  const [left] = await db.sql.query(statement(`SELECT count(*)::int AS n, max(attempts)::int AS attempts FROM skiplock.job WHERE task = 'api-call' AND status = 'QUEUED'`));
  expect(left).toEqual({ n: KEYS * (700 - LIMIT * 60), attempts: 0 });
}, 180_000);

test('a job fired by a schedule carries its flow keys and is claimed under the limit', async () => {
  let now = Date.parse('2031-01-01T00:00:30Z');
  const task = defineTask({ name: 'sched-limited', payload: z.object({ tenant: z.string() }), concurrency: { limit: 1, key: (p) => p.tenant }, handler: () => 'ran' });
  const skiplock = createSkiplock({ sql: db.sql, tasks: [task], now: () => new Date(now), log: quiet });
  await skiplock.putSchedule('tenant-9-sync', { cron: '* * * * *', task: 'sched-limited', payload: { tenant: 't9' } });
  await skiplock.tick({ untilIdle: true });
  now += 40_000;
  await skiplock.tick({ untilIdle: true });
  const rows = await db.sql.query(statement(`SELECT status, flow_key, rate_key FROM skiplock.job WHERE task = 'sched-limited'`));
  expect(rows).toEqual([{ status: 'DONE', flow_key: 't9', rate_key: '' }]);
});

test('a key held by its rate limit wakes the ticker when its window opens, not before', async () => {
  const T0 = Date.parse('2032-01-01T00:00:00Z');
  let now = T0;
  const task = defineTask({ name: 'wake-rate', payload: z.object({ k: z.string() }), rateLimit: { limit: 2, periodMs: 10_000, key: (p) => p.k }, handler: () => {} });
  const skiplock = createSkiplock({ sql: db.sql, tasks: [task], now: () => new Date(now), log: quiet });
  await skiplock.enqueueBatch(Array.from({ length: 5 }, () => ({ task: 'wake-rate', payload: { k: 'x' } })));
  expect(await skiplock.msUntilNextWork()).toBeLessThanOrEqual(0);
  now = T0 + 1_000;
  expect(await skiplock.tick({ untilIdle: true })).toMatchObject({ claimed: 2, done: 2 });
  // Two starts at 1 s: the next may start at 11 s.
  now = T0 + 3_000;
  expect(await skiplock.tick({ untilIdle: true })).toMatchObject({ claimed: 0 });
  expect(await skiplock.msUntilNextWork()).toBe(8_000);
  now = T0 + 10_999;
  expect(await skiplock.tick({ untilIdle: true })).toMatchObject({ claimed: 0 });
  now = T0 + 11_000;
  expect(await skiplock.tick({ untilIdle: true })).toMatchObject({ claimed: 2 });
  now = T0 + 19_000;
  expect(await skiplock.msUntilNextWork()).toBe(2_000);
});

// Issue 31, item 4 (no spinning): a key at its concurrency limit, held by a job RUNNING in another
// invocation, is not due now: the holder's end (its own tick reports it) or its lease expiry is.
test('a key at its concurrency limit, its holder running elsewhere, is due at the lease expiry, not now; a free key is due now', async () => {
  const T0 = Date.parse('2032-02-01T00:00:00Z');
  let now = T0;
  const perKey = defineTask({ name: 'wake-conc', payload: z.object({ k: z.string() }), concurrency: { limit: 1, key: (p) => p.k }, handler: () => {} });
  const global = defineTask({ name: 'wake-global', payload: z.object({ k: z.string() }), concurrency: { limit: 1 }, handler: () => {} });
  const skiplock = createSkiplock({ sql: db.sql, tasks: [perKey, global], now: () => new Date(now), log: quiet });
  await skiplock.enqueueBatch([{ task: 'wake-conc', payload: { k: 'held' } }, { task: 'wake-conc', payload: { k: 'held' } }]);
  // The first job of key `held` is RUNNING in another invocation, its lease 60 s away.
  await db.sql.query(statement(`UPDATE skiplock.job SET status = 'RUNNING', attempts = 1, locked_by = 'elsewhere', locked_until = $1::timestamptz
                                 WHERE id = (SELECT min(id) FROM skiplock.job WHERE task = 'wake-conc')`, [new Date(T0 + 60_000).toISOString()]));
  expect(await skiplock.tick({ untilIdle: true })).toMatchObject({ claimed: 0 });
  expect(await skiplock.msUntilNextWork()).toBe(60_000);
  // Another key of the same task is free: due now.
  await skiplock.enqueue({ task: 'wake-conc', payload: { k: 'free' } });
  expect(await skiplock.msUntilNextWork()).toBeLessThanOrEqual(0);
  await skiplock.tick({ untilIdle: true });
  expect(await skiplock.msUntilNextWork()).toBe(60_000);
  // A task-wide limit, held the same way.
  await skiplock.enqueueBatch([{ task: 'wake-global', payload: { k: 'a' } }, { task: 'wake-global', payload: { k: 'b' } }]);
  await db.sql.query(statement(`UPDATE skiplock.job SET status = 'RUNNING', attempts = 1, locked_by = 'elsewhere', locked_until = $1::timestamptz
                                 WHERE id = (SELECT min(id) FROM skiplock.job WHERE task = 'wake-global')`, [new Date(T0 + 30_000).toISOString()]));
  expect(await skiplock.tick({ untilIdle: true })).toMatchObject({ claimed: 0 });
  expect(await skiplock.msUntilNextWork()).toBe(30_000);
  now = T0 + 5_000;
  expect(await skiplock.msUntilNextWork()).toBe(25_000);
});

test('without flow control the claim is the plain statement: claimable_jobs alone, no new parameter', () => {
  const params = { now: null, workerId: 'w', results: [], limit: 5, budgetMs: 1_000, tasks: ['a'], leaseMs: 1, leaseGraceMs: 1 };
  const plain = completeAndClaim(params);
  expect(plain).toEqual(completeAndClaim({ ...params, flowLimits: [] }));
  // The task list without paused tasks (migration 011): the same claimable_jobs call.
  expect(plain.text).toContain('skiplock.claimable_jobs($4, coalesce($1::timestamptz, now()), $5, ARRAY(SELECT unnest($8::text[]) EXCEPT SELECT name FROM skiplock.paused_task))');
  expect(plain.text).not.toContain('claim_limited');
  const limited = completeAndClaim({ ...params, tasks: ['a', 'b'], flowLimits: [{ task: 'b', limit: 1 }] });
  expect(limited.text).toContain('skiplock.claim_limited');
  expect(limited.values.slice(9, 11)).toEqual([JSON.stringify([{ task: 'b', limit: 1 }]), ['a']]);
  expect(plain.values).toHaveLength(limited.values.length - 2);
});

test('jobs enqueued before their task had a limit are given their keys by the tick, then claimed under the limit', async () => {
  const before = defineTask({ name: 'gains-limit', payload: z.object({ tenant: z.string() }), handler: () => {} });
  const old = createSkiplock({ sql: db.sql, tasks: [before], log: quiet });
  await old.enqueueBatch(Array.from({ length: 6 }, (_, i) => ({ task: 'gains-limit', payload: { tenant: `t${i % 2}` } })));
  let running = 0;
  let peak = 0;
  const after = defineTask({
    name: 'gains-limit',
    payload: z.object({ tenant: z.string() }),
    concurrency: { limit: 1, key: (p) => p.tenant },
    handler: async () => {
      peak = Math.max(peak, (running += 1));
      await sleep(20);
      running -= 1;
    },
  });
  const skiplock = createSkiplock({ sql: db.sql, tasks: [after], log: quiet });
  expect(await skiplock.tick({ untilIdle: true, concurrency: 10 })).toMatchObject({ claimed: 6, done: 6 });
  expect(peak).toBe(2);
  const keys = await db.sql.query(statement(`SELECT DISTINCT flow_key FROM skiplock.job WHERE task = 'gains-limit' ORDER BY 1`));
  expect(keys).toEqual([{ flow_key: 't0' }, { flow_key: 't1' }]);
});

test('recorded starts of keys never claimed again are pruned once their window has passed', async () => {
  const T0 = Date.parse('2034-01-01T00:00:00Z');
  let now = T0;
  const task = defineTask({ name: 'prune-rate', payload: z.object({ k: z.string() }), rateLimit: { limit: 5, periodMs: 1_000, key: (p) => p.k }, handler: () => {} });
  const count = async () => Number((await db.sql.query(statement(`SELECT count(*)::int AS n FROM skiplock.flow_start WHERE task = 'prune-rate'`)))[0]!.n);
  const first = createSkiplock({ sql: db.sql, tasks: [task], now: () => new Date(now), log: quiet });
  await first.enqueueBatch(['a', 'b', 'c'].map((k) => ({ task: 'prune-rate', payload: { k } })));
  await first.tick({ untilIdle: true });
  expect(await count()).toBe(3);
  now = T0 + 1_000;
  await createSkiplock({ sql: db.sql, tasks: [task], now: () => new Date(now), log: quiet }).tick({ untilIdle: true });
  expect(await count()).toBe(0);
});

test('a paused task with limits is neither claimed nor keeps the ticker awake (the limited claim skips paused tasks too)', async () => {
  const task = defineTask({
    name: 'paused-limited',
    payload: z.object({ tenant: z.string() }),
    concurrency: { limit: 1, key: (p) => p.tenant },
    rateLimit: { limit: 5, periodMs: 1_000, key: (p) => p.tenant },
    handler: () => {},
  });
  // Retention off: finished jobs of other tests would be a reason to wake (the next retention pass).
  const skiplock = createSkiplock({ sql: db.sql, tasks: [task], log: quiet, retention: false });
  await skiplock.enqueue({ task: 'paused-limited', payload: { tenant: 'a' } });
  await skiplock.pauseTask('paused-limited');
  expect((await skiplock.tick({ untilIdle: true, budgetMs: 15_000 })).claimed).toBe(0);
  expect(await skiplock.msUntilNextWork()).toBeNull();
  await skiplock.resumeTask('paused-limited');
  expect(await skiplock.msUntilNextWork()).toBeLessThanOrEqual(0);
  expect((await skiplock.tick({ untilIdle: true, budgetMs: 15_000 })).claimed).toBe(1);
});

/**
 * Migration 014: a limited claim visits at most 1,000 keys. It walks only its own tasks, each
 * from where the last claim of that task stopped, so no due job waits behind 1,000 keys that
 * cannot be taken (nothing due, full, or another task's), whatever the keys look like.
 */
test('a due job behind 1,000 keys with nothing due is claimed within two claims, whatever its keys sort like', async () => {
  const task = defineTask({ name: 'strand', payload: z.object({ k: z.string() }), concurrency: { limit: 1, key: (p) => p.k }, handler: () => {} });
  const skiplock = createSkiplock({ sql: db.sql, tasks: [task], log: quiet });
  const later = new Date(Date.now() + 86_400_000);
  await skiplock.enqueueBatch(Array.from({ length: 1001 }, (_, i) => ({ task: 'strand', payload: { k: `user-${String(i).padStart(4, '0')}` }, runAt: later })));
  const due = await skiplock.enqueue({ task: 'strand', payload: { k: 'user-9999' } });
  const limits = flowLimits(createRegistry([task]));
  const claimed: string[] = [];
  for (let i = 0; i < 2; i++) {
    const rows = await db.sql.query(completeAndClaim({ now: null, workerId: `w${i}`, results: [], limit: 10, budgetMs: 60_000, tasks: ['strand'], leaseMs: 60_000, leaseGraceMs: 0, flowLimits: limits }));
    claimed.push(...rows.filter((r) => r.id !== null).map((r) => String(r.id)));
  }
  expect(claimed).toEqual([due.id]);
});

test('a limited task is claimed while another limited task, paused, has more than 1,000 keys queued', async () => {
  const a = defineTask({ name: 'a-sync', payload: z.object({ k: z.string() }), concurrency: { limit: 1, key: (p) => p.k }, handler: () => {} });
  const b = defineTask({ name: 'b-report', payload: z.object({}), concurrency: { limit: 2 }, handler: () => {} });
  const skiplock = createSkiplock({ sql: db.sql, tasks: [a, b], log: quiet });
  await skiplock.enqueueBatch(Array.from({ length: 1001 }, (_, i) => ({ task: 'a-sync', payload: { k: String(i).padStart(4, '0') } })));
  await skiplock.pauseTask('a-sync');
  try {
    const due = await skiplock.enqueue({ task: 'b-report', payload: {} });
    const rows = await db.sql.query(completeAndClaim({
      now: null, workerId: 'w', results: [], limit: 10, budgetMs: 60_000, tasks: ['a-sync', 'b-report'], leaseMs: 60_000, leaseGraceMs: 0,
      flowLimits: flowLimits(createRegistry([a, b])),
    }));
    expect(rows.filter((r) => r.id !== null).map((r) => String(r.id))).toEqual([due.id]);
  } finally {
    await skiplock.resumeTask('a-sync');
  }
});
