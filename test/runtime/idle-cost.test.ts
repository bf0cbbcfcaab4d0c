/**
 * What an idle minute costs: every statement is a request on Neon (and a subrequest on Workers),
 * so an idle tick must make at most one statement per second on average — the fire read folded
 * into the claim, upkeep (reaping, pruning) taking a poll's place. Timers and performance.now()
 * are faked so that a minute passes at once; every statement runs on the real database.
 */
import { afterAll, afterEach, beforeAll, expect, test, vi } from 'vitest';
import { z } from 'zod';
import { createSkiplock, defineSchedule, defineTask } from '../../src/index.ts';
import { statement, type Sql, type Statement } from '../../src/store/sql.ts';
import type { TickOptions } from '../../src/runtime/tick/tick.ts';
import { createTestDb, type TestDb } from '../support/db.ts';

let db: TestDb;
beforeAll(async () => {
  db = await createTestDb();
});
afterAll(() => db.drop());
afterEach(() => {
  vi.useRealTimers();
});

const kindOf = (s: Statement) =>
  s.text.includes('next_claimable_at') ? 'conclusion' : s.text.includes('claimable_jobs') ? 'claim' : s.text.includes('jsonb_to_recordset($2::jsonb) AS d(') ? 'fire-read'
    : s.text.includes('locked_until < ') ? 'reap' : s.text.includes('DELETE FROM skiplock.job') ? 'prune' : 'other';

/** The claim's lease probe (completeAndClaim's probeLeases). */
const LEASE_PROBE = "x.status = 'RUNNING' AND x.locked_until < ";

/** A Sql that counts statements by kind and knows how many are in flight. */
function countingSql(sql: Sql) {
  const counts: Record<string, number> = {};
  /** Claims that also asked whether a lease has expired. */
  const probes = { leases: 0 };
  const inFlight = new Set<Promise<unknown>>();
  const wrapped: Sql = {
    ...sql,
    query<R extends Record<string, unknown>>(s: Statement) {
      counts[kindOf(s)] = (counts[kindOf(s)] ?? 0) + 1;
      if (kindOf(s) === 'claim' && s.text.includes(LEASE_PROBE)) probes.leases += 1;
      const p = sql.query<R>(s);
      const tracked = p.finally(() => inFlight.delete(tracked));
      inFlight.add(tracked);
      return p;
    },
  };
  return { sql: wrapped, counts, probes, inFlight };
}

const realImmediate = () => new Promise((resolve) => setImmediate(resolve));

/** Runs a tick of `ms` of fake time: real I/O is awaited; when nothing is in flight, fake time jumps to the next timer. */
async function idleTickFor(ms: number, options: TickOptions, withSchedule: boolean) {
  const task = defineTask({ name: 'noop', payload: z.object({}), handler: () => null });
  const schedules = withSchedule ? [defineSchedule({ name: 'hourly', cron: '0 0 * * *', task, payload: {} })] : [];
  const counted = countingSql(db.sql);
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'performance'] });
  const skiplock = createSkiplock({ sql: counted.sql, tasks: [task], schedules, log: () => {} });
  let finished = false;
  const ticking = skiplock.tick({ ...options, budgetMs: ms + 1_000, marginMs: 1_000 }).finally(() => (finished = true));
  while (!finished) {
    for (let i = 0; i < 5 && counted.inFlight.size === 0 && !finished; i++) await realImmediate();
    if (counted.inFlight.size > 0) {
      await Promise.allSettled([...counted.inFlight]);
      continue;
    }
    if (!finished) await vi.advanceTimersToNextTimerAsync();
  }
  const result = await ticking;
  vi.useRealTimers();
  const total = Object.values(counted.counts).reduce((a, b) => a + b, 0);
  return { total, counts: counted.counts, probes: counted.probes, result };
}

test('an idle minute of one tick costs at most 60 statements (poll 1 s, as every platform sets it), schedules and upkeep included', async () => {
  await db.emptyJobs('skiplock.schedule');
  const { total, counts, probes, result } = await idleTickFor(60_000, { pollIntervalMs: 1_000 }, true);
  console.log(`idle minute, poll 1 s, one static schedule: ${total} statements`, counts);
  expect(result).toMatchObject({ claimed: 0, fired: 0 });
  expect(counts['fire-read']).toBe(1); // only at the start: after that the claim says whether one is due
  // Claims ask about expired leases at the start and then every reapIntervalMs (10 s), not at each poll.
  expect(probes.leases).toBeLessThanOrEqual(7);
  expect(total).toBeLessThanOrEqual(60);
});

test('the library default (pollIntervalMs 1 s) keeps the same bound', async () => {
  await db.emptyJobs('skiplock.schedule');
  const { total, counts } = await idleTickFor(60_000, {}, false);
  console.log(`idle minute, library defaults, no schedule: ${total} statements`, counts);
  expect(total).toBeLessThanOrEqual(60);
});

test('a schedule that falls due while the tick runs still fires within the tick: the claiming statement says so', async () => {
  await db.emptyJobs('skiplock.schedule');
  const task = defineTask({ name: 'noop', payload: z.object({}), timeoutMs: 1_000, handler: () => null });
  const counted = countingSql(db.sql);
  const skiplock = createSkiplock({ sql: counted.sql, tasks: [task], schedules: [defineSchedule({ name: 'every-second', every: '1s', task, payload: {} })], log: () => {} });
  // Real time: the instants are the database's. 3.4 s of claiming after the first firing.
  const result = await skiplock.tick({ budgetMs: 4_000, marginMs: 600, pollIntervalMs: 100 });
  expect(result.fired).toBeGreaterThanOrEqual(3);
  expect(result.done).toBeGreaterThanOrEqual(result.fired - 1); // the last may fire too late to fit its timeout
  // Read only when a claim said one was due (plus the start), not on every poll.
  expect(counted.counts['fire-read']).toBeLessThanOrEqual(result.fired + 1);
  expect(counted.counts.claim).toBeGreaterThan(counted.counts['fire-read']!);
});

test('a tick that runs one job claims it and writes it in two statements, with no reaper while no lease has expired; an expired one is reaped in the same tick', async () => {
  await db.emptyJobs('skiplock.schedule');
  const ran: string[] = [];
  const task = defineTask({ name: 'noop', payload: z.object({ n: z.number() }), handler: (payload) => void ran.push(`ran ${payload.n}`) });
  const counted = countingSql(db.sql);
  const skiplock = createSkiplock({ sql: counted.sql, tasks: [task], log: () => {} });
  await skiplock.enqueue({ task: 'noop', payload: { n: 1 } });
  Object.keys(counted.counts).forEach((k) => delete counted.counts[k]);
  expect(await skiplock.tick({ untilIdle: true })).toMatchObject({ claimed: 1, done: 1, reaped: 0 });
  // The claim (which also says that no lease has expired), then the result with an empty claim;
  // beside them only the start's schedule read and the once-a-minute retention pass. Only the first
  // claim asks about leases: the probe walks index entries of finished jobs until VACUUM. And the
  // conclusion into the wake state (a tick that claimed something asks when work is next due).
  expect(counted.counts).toEqual({ claim: 2, 'fire-read': 1, prune: 1, conclusion: 1 });
  expect(counted.probes.leases).toBe(1);

  // A job whose worker vanished: its lease has expired. The first claim sees it, the reaper returns it, the next claim runs it.
  const lost = await skiplock.enqueue({ task: 'noop', payload: { n: 2 } });
  await db.sql.query(statement(`UPDATE skiplock.job SET status = 'RUNNING', attempts = 1, locked_by = 'gone', locked_until = now() - interval '1 second' WHERE id = $1`, [lost.id]));
  Object.keys(counted.counts).forEach((k) => delete counted.counts[k]);
  counted.probes.leases = 0;
  expect(await skiplock.tick({ untilIdle: true })).toMatchObject({ reaped: 1, claimed: 1, done: 1 });
  // The reaper, and no schedule read: this instance read them in its first tick (its claims say when one is due).
  expect(counted.counts).toEqual({ claim: 3, reap: 1, conclusion: 1 });
  expect(counted.probes.leases).toBe(1);
  expect(ran).toEqual(['ran 1', 'ran 2']);
});

test('after a busy spell, the next poll comes one poll interval later: only statements that found nothing stretch the wait', async () => {
  await db.emptyJobs('skiplock.schedule');
  const started = new Map<number, number>();
  const task = defineTask({ name: 'stamp', payload: z.object({ n: z.number() }), handler: (payload) => void started.set(payload.n, performance.now()) });
  const skiplock = createSkiplock({ sql: db.sql, tasks: [task], log: () => {} });
  // Written behind the tick's back (no wake-up): only its polls find these jobs.
  const insert = (ns: number[]) =>
    db.sql.query(statement(`INSERT INTO skiplock.job (task, payload) SELECT 'stamp', jsonb_build_object('n', n) FROM unnest($1::int[]) n`, [ns]));
  const stop = new AbortController();
  const ticking = skiplock.tick({ budgetMs: 30_000, pollIntervalMs: 200, concurrency: 25, signal: stop.signal });
  try {
    // A busy spell: 500 jobs, 25 at a time, about 20 statements without a pause.
    await insert(Array.from({ length: 500 }, (_, i) => i + 1));
    await vi.waitFor(() => expect(started.size).toBe(500), { timeout: 10_000, interval: 20 });
    await new Promise((resolve) => setTimeout(resolve, 100));
    const insertedAt = performance.now();
    await insert([0]);
    await vi.waitFor(() => expect(started.has(0)).toBe(true), { timeout: 15_000, interval: 10 });
    // At most a poll interval (200 ms), and the statements' own time; 20 × 200 ms before the fix.
    expect(started.get(0)! - insertedAt).toBeLessThan(800);
  } finally {
    stop.abort();
    await ticking;
  }
});
