/**
 * Issue 35 item 1, fair share (migration 023): within a priority level the due jobs are claimed
 * lane by lane (a fairness key each, the jobs without a key one more), from where the level's last
 * claim stopped. The bound (docs/flow-control.md): a job at the head of its lane is claimed within
 * ceil(L / n) + 1 claims of n jobs, L the lanes with due jobs — whatever the other lanes hold.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { z } from 'zod';
import { createSkiplock, defineTask } from '../../src/index.ts';
import { completeAndClaim } from '../../src/store/claim.ts';
import { QUEUE_INSERT, queueRowsFrom } from '../../src/store/queue.ts';
import { statement, type Sql } from '../../src/store/sql.ts';
import { createTestDb, type TestDb } from '../support/db.ts';

let db: TestDb;
beforeAll(async () => {
  db = await createTestDb();
});
afterAll(() => db.drop());

const LETTERS = 'BCDEFGHIJKLMNOPQRSTUVWXYZ'.split('');

async function reset() {
  await db.sql.query(statement(`TRUNCATE skiplock.queue, skiplock.fair_cursor, skiplock.job_record CASCADE`));
}

/** `count` due jobs of `task` with fairness key `key` (null: none) at `priority`, due `ageS` seconds ago. */
async function add(task: string, key: string | null, count: number, { priority = 0, ageS = 3600, flowKey = null as string | null, timeoutMs = 10_000 } = {}) {
  // Both rows at once, as an enqueue writes them (the view's test trigger takes a row at a time).
  await db.sql.query(statement(
    `WITH x AS (
       INSERT INTO skiplock.job_record (task, fair_key, flow_key, rate_key, priority, run_at, max_attempts, timeout_ms, created_at, updated_at)
       SELECT $1, $2, $5, $6, $3, now() - make_interval(secs => $4) + g * interval '1 microsecond', 5, $8, now(), now()
         FROM generate_series(1, $7::int) g
       RETURNING *
     )
     ${QUEUE_INSERT} ${queueRowsFrom('x')}`,
    [task, key, priority, ageS, flowKey, flowKey === null ? null : '', count, timeoutMs],
  ));
}

/** One claim of `n` jobs, as a tick sends it: the claimed jobs' keys (or the task's name without one), in order. */
async function claim(n: number, tasks = ['t', 'u']) {
  const rows = await db.sql.query(completeAndClaim({
    now: null, workerId: 'w', results: [], limit: n, budgetMs: 60_000, tasks, leaseMs: 60_000, leaseGraceMs: 1_000,
  }));
  return rows.filter((r) => r.id !== null).map((r) => (r.fair_key === null ? `~${r.task}` : String(r.fair_key)));
}

test('100,000 due jobs of key A, then one job each of B…Z: each is claimed within ceil(26 / 10) claims of 10', async () => {
  await reset();
  await add('t', 'A', 100_000, { ageS: 7200 });
  for (const k of LETTERS) await add('t', k, 1, { ageS: 60 });
  const position = new Map<string, number>();
  for (let c = 1; c <= 4; c++) for (const key of await claim(10)) if (!position.has(key)) position.set(key, c);
  for (const k of LETTERS) expect(position.get(k), k).toBeLessThanOrEqual(Math.ceil(26 / 10));
  expect(position.get('A')).toBe(1);
  // Once B…Z are done, A has the level to itself: whole claims of A.
  expect(await claim(10)).toEqual(Array(10).fill('A'));
});

test('a tenant that spreads its backlog over many payloads still has one lane: the key names the tenant', async () => {
  await reset();
  // 20,000 jobs of tenant X (their payloads would name 1,000 shards: a cap per shard would not hold X back).
  await add('t', 'X', 20_000, { ageS: 7200 });
  await add('t', 'Y', 1, { ageS: 1 });
  expect(await claim(2)).toEqual(['X', 'Y']);
});

test('the jobs without a key are one lane among the keys, and a claim with room left shares it equally', async () => {
  await reset();
  await add('t', null, 1_000, { ageS: 7200 });
  await add('t', 'A', 1_000);
  await add('t', 'B', 1_000);
  const got = await claim(30);
  expect(got.filter((k) => k === '~t')).toHaveLength(10);
  expect(got.filter((k) => k === 'A')).toHaveLength(10);
  expect(got.filter((k) => k === 'B')).toHaveLength(10);
  // 3 lanes, 10 per claim: the remainder rotates (no lane gets the extra job every time).
  const counts = { '~t': 0, A: 0, B: 0 } as Record<string, number>;
  for (let i = 0; i < 30; i++) for (const k of await claim(10)) counts[k]! += 1;
  expect(Object.values(counts).map((n) => Math.abs(n - 100))).toEqual([0, 0, 0]);
});

test('priority between levels holds: every due job of a higher level first, lanes taking turns within each', async () => {
  await reset();
  await add('t', 'A', 50, { priority: 5 });
  await add('t', null, 5, { priority: 5 });
  await add('t', 'B', 50, { priority: 0, ageS: 99_999 });
  const first = await claim(40);
  expect(first.filter((k) => k === 'B')).toHaveLength(0);
  const second = await claim(40);
  // The rest of level 5 (A's 15 left … ) before any of level 0.
  const level5Left = 55 - first.length;
  expect(second.slice(0, level5Left).every((k) => k !== 'B')).toBe(true);
  expect(second.slice(level5Left).every((k) => k === 'B')).toBe(true);
});

test('jobs not yet due, of a task this deployment lacks, or over its budget wait; without fair jobs the plain claim takes them', async () => {
  await reset();
  await add('t', 'A', 3, { ageS: -3600 });
  await add('other', 'B', 3);
  // Invariant 4: a timeout longer than the claim's budget (60 s here), with a key or without.
  await add('t', 'D', 3, { timeoutMs: 120_000 });
  await add('t', null, 3, { timeoutMs: 120_000 });
  await add('t', 'C', 2);
  expect((await claim(10)).sort()).toEqual(['C', 'C']);
  await reset();
  await add('t', null, 3);
  expect(await claim(10)).toEqual(['~t', '~t', '~t']);
});

test('8 claims in parallel: every job claimed once, every lane reached, A held to a share', async () => {
  await reset();
  await add('t', 'A', 5_000, { ageS: 7200 });
  for (const k of LETTERS) await add('t', k, 20, { ageS: 60 });
  const claimed: string[][] = [];
  await Promise.all(Array.from({ length: 8 }, async () => {
    for (let round = 0; round < 4; round++) claimed.push(await claim(10));
  }));
  const all = claimed.flat();
  expect(all).toHaveLength(320);
  const [{ n }] = await db.sql.query(statement(`SELECT count(DISTINCT id)::int AS n FROM skiplock.queue WHERE status = 'RUNNING'`)) as [{ n: number }];
  expect(n).toBe(320);
  // Claims at the same moment read the same cursor and each take a job of the same lanes; the
  // cursor moves once per such wave (docs/flow-control.md). So: no lane is skipped, and A, one lane
  // of 26, is far from the half of the jobs it would take in due order (5,000 of its 5,520).
  expect(all.filter((k) => k === 'A').length).toBeLessThan(320 / 4);
  for (const k of LETTERS) expect(all.filter((x) => x === k).length, k).toBeGreaterThanOrEqual(1);
});

test('tasks with a concurrency or a rate limit are claimed by their own claim, their limits hold beside fair jobs', async () => {
  await reset();
  await add('lim', 'A', 20, { flowKey: 'k1' });
  await add('rated', 'A', 20, { flowKey: '' });
  await add('t', 'A', 20);
  await add('t', 'B', 20);
  const rows = await db.sql.query(completeAndClaim({
    now: null, workerId: 'w', results: [], limit: 13, budgetMs: 60_000, tasks: ['t', 'lim', 'rated'], leaseMs: 60_000, leaseGraceMs: 1_000,
    flowLimits: [{ task: 'lim', limit: 2 }, { task: 'rated', rate: 3, period_ms: 60_000 }],
  }));
  const got = rows.filter((r) => r.id !== null);
  expect(got.filter((r) => r.task === 'lim')).toHaveLength(2);
  expect(got.filter((r) => r.task === 'rated')).toHaveLength(3);
  const fair = got.filter((r) => r.task === 't').map((r) => r.fair_key);
  expect(fair.filter((k) => k === 'A')).toHaveLength(4);
  expect(fair.filter((k) => k === 'B')).toHaveLength(4);
});

describe('through ticks, over pg and over Neon\'s HTTP driver', () => {
  async function run(sql: Sql) {
    await reset();
    const order: string[] = [];
    const mail = defineTask({
      name: 'mail', payload: z.object({ tenant: z.string() }), fairness: { key: (p) => p.tenant },
      handler: (p) => void order.push(p.tenant),
    });
    const skiplock = createSkiplock({ sql, tasks: [mail], log: () => {}, retention: false });
    await skiplock.enqueueBatch(Array.from({ length: 60 }, () => ({ task: 'mail', payload: { tenant: 'big' } })));
    await skiplock.enqueueBatch(['s1', 's2', 's3', 's4'].map((tenant) => ({ task: 'mail', payload: { tenant } })));
    const result = await skiplock.tick({ untilIdle: true, concurrency: 5 });
    expect(result.done).toBe(64);
    // Claims of 5 over 5 lanes: the small tenants are in the first claim, not after big's 60.
    expect(order.slice(0, 5).sort()).toEqual(['big', 's1', 's2', 's3', 's4']);
    expect((await skiplock.stats()).counts.DONE).toBe(64);
  }

  test('pg', () => run(db.sql));

  test('Neon HTTP', async () => {
    const { startNeonProxy } = await import('../../src/dev/neon-proxy.ts');
    const { createNeonHttpDriver } = await import('../../src/store/drivers/neon-http.ts');
    const proxy = await startNeonProxy();
    const sql = createNeonHttpDriver(db.url, { fetchEndpoint: proxy.fetchEndpoint });
    try {
      await run(sql);
    } finally {
      await sql.close();
      await proxy.close();
    }
  });
});

test('the wake state sees fair jobs: an idle deployment wakes when the first of them is due, at any level', async () => {
  await reset();
  const mail = defineTask({ name: 't', payload: z.object({}), fairness: {}, handler: () => {} });
  const skiplock = createSkiplock({ sql: db.sql, tasks: [mail], log: () => {}, retention: false });
  expect(await skiplock.msUntilNextWork({ budgetMs: 60_000 })).toBeNull();
  await skiplock.enqueue({ task: 't', payload: {}, fairnessKey: 'a', delayMs: 30_000, priority: 3 });
  await skiplock.enqueue({ task: 't', payload: {}, fairnessKey: 'b', delayMs: 20_000 });
  const ms = await skiplock.msUntilNextWork({ budgetMs: 60_000 });
  expect(ms).toBeGreaterThan(15_000);
  expect(ms).toBeLessThanOrEqual(20_000);
  // The stats' lag counts a due fair job.
  await add('t', 'c', 1, { ageS: 90 });
  expect((await skiplock.stats()).oldestQueuedAgeMs).toBeGreaterThanOrEqual(89_000);
});
