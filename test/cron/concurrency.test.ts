/**
 * Platforms deliver a cron event more than once and invocations overlap: 50 ticks race for the
 * same instant, every simulated minute for 200 minutes, through separate Skiplock instances on
 * separate pools. Each instant must fire exactly once, with exactly one job.
 */
import { afterAll, beforeAll, expect, test } from 'vitest';
import { defineSchedule } from '../../src/runtime/schedules/definition.ts';
import type { Skiplock } from '../../src/runtime/skiplock.ts';
import { createPgDriver } from '../../src/store/drivers/pg.ts';
import { statement, type Sql } from '../../src/store/sql.ts';
import { createTestDb, type TestDb } from '../support/db.ts';
import { createClock, MINUTE, skiplockAt } from './support.ts';

let db: TestDb;
let pools: Sql[] = [];
beforeAll(async () => {
  db = await createTestDb();
  pools = Array.from({ length: 5 }, () => createPgDriver(db.url, { max: 10 }));
});
afterAll(async () => {
  await Promise.all(pools.map((pool) => pool.close()));
  await db.drop();
});

const TICKS = 50;
const MINUTES = 200;

test(`${TICKS} concurrent ticks per instant over ${MINUTES} simulated minutes fire each instant exactly once`, async () => {
  const base = new Date('2026-03-02T00:00:00Z').getTime();
  const clock = createClock(new Date(base + 1000));
  const schedules = [
    defineSchedule({ name: 'minutely', cron: '* * * * *', task: 'noop', catchUp: 'all' }),
    defineSchedule({ name: 'every-20s', cron: '*/20 * * * * *', task: 'noop', catchUp: 'all' }),
  ];
  const instances: Skiplock[] = Array.from({ length: TICKS }, (_, i) => skiplockAt(pools[i % pools.length]!, clock, { schedules }));
  await instances[0]!.putSchedule('tenant-1', { cron: '*/2 * * * *', task: 'noop', payload: { n: 1 } });

  const tickOptions = { untilIdle: true, reapIntervalMs: 0, concurrency: 4, pollIntervalMs: 0 };
  let fired = 0;
  for (let minute = 0; minute < MINUTES; minute++) {
    clock.set(new Date(base + minute * MINUTE + 1000));
    // Half run whole ticks (fire, claim, run), half only fire: all race on the same instants.
    const results = await Promise.all(
      instances.map((skiplock, i) => (i % 2 === 0 ? skiplock.tick(tickOptions).then((r) => r.fired) : skiplock.fireDueSchedules())),
    );
    fired += results.reduce((a, b) => a + b, 0);
  }

  const expected = { minutely: MINUTES - 1, 'every-20s': (MINUTES - 1) * 3, 'tenant-1': Math.floor((MINUTES - 1) / 2) };
  const counts = await db.sql.query<{ name: string; firings: number; distinct_instants: number; jobs: number; linked: number; orphans: number }>(
    statement(`
      SELECT s.name,
             (SELECT count(*)::int FROM skiplock.cron_firing f WHERE f.schedule_name = s.name) AS firings,
             (SELECT count(DISTINCT scheduled_for)::int FROM skiplock.cron_firing f WHERE f.schedule_name = s.name) AS distinct_instants,
             (SELECT count(*)::int FROM skiplock.job j WHERE j.schedule_name = s.name) AS jobs,
             (SELECT count(*)::int FROM skiplock.cron_firing f JOIN skiplock.job j
                ON j.id = f.job_id AND j.schedule_name = f.schedule_name AND j.scheduled_for = f.scheduled_for
               WHERE f.schedule_name = s.name) AS linked,
             (SELECT count(*)::int FROM skiplock.job j WHERE j.schedule_name = s.name AND NOT EXISTS (
                SELECT 1 FROM skiplock.cron_firing f WHERE f.job_id = j.id)) AS orphans
        FROM skiplock.schedule s ORDER BY s.name`),
  );
  for (const row of counts) {
    const want = expected[row.name as keyof typeof expected];
    expect(row, row.name).toEqual({ name: row.name, firings: want, distinct_instants: want, jobs: want, linked: want, orphans: 0 });
  }
  expect(fired).toBe(expected.minutely + expected['every-20s'] + expected['tenant-1']);
  // Each instant, each job: one row per (schedule, instant) in the job table too.
  const [dupes] = await db.sql.query(
    statement(`SELECT count(*)::int AS n FROM (SELECT 1 FROM skiplock.job WHERE schedule_name IS NOT NULL GROUP BY schedule_name, scheduled_for HAVING count(*) > 1) d`),
  );
  expect(dupes!.n).toBe(0);
}, 300_000);
