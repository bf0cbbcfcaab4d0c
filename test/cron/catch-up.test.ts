/** Missed instants after a 10-minute gap, under each catch-up policy, and the per-tick bound. */
import { afterAll, beforeAll, expect, test } from 'vitest';
import { createTestDb, type TestDb } from '../support/db.ts';
import { createClock, firings, iso, MINUTE, scheduledJobs, skiplockAt } from './support.ts';

let db: TestDb;
beforeAll(async () => (db = await createTestDb()));
afterAll(() => db.drop());

const minutes = (from: string, count: number) =>
  Array.from({ length: count }, (_, i) => new Date(new Date(from).getTime() + i * MINUTE).toISOString());

test("catchUp 'all' fires every missed instant, oldest first", async () => {
  const clock = createClock('2026-01-05T10:00:30Z');
  const skiplock = skiplockAt(db.sql, clock);
  await skiplock.putSchedule('all', { cron: '* * * * *', task: 'noop', catchUp: 'all' });
  clock.set('2026-01-05T10:10:30Z'); // no tick for 10 minutes
  expect(await skiplock.fireDueSchedules()).toBe(10);
  expect(iso(await firings(db.sql, 'all'))).toEqual(minutes('2026-01-05T10:01:00Z', 10));
  expect((await scheduledJobs(db.sql, 'all')).map((j) => j.status)).toEqual(Array(10).fill('QUEUED'));
});

test("catchUp 'latest' fires only the most recent missed instant", async () => {
  const clock = createClock('2026-01-05T10:00:30Z');
  const skiplock = skiplockAt(db.sql, clock);
  await skiplock.putSchedule('latest', { cron: '* * * * *', task: 'noop', catchUp: 'latest' });
  clock.set('2026-01-05T10:10:30Z');
  expect(await skiplock.fireDueSchedules()).toBe(1);
  expect(iso(await firings(db.sql, 'latest'))).toEqual(['2026-01-05T10:10:00.000Z']);
  // The skipped ones stay skipped: the watermark moved past them.
  expect(await skiplock.fireDueSchedules()).toBe(0);
});

test("catchUp 'none' skips missed instants and fires only one at most a minute old", async () => {
  const clock = createClock('2026-01-05T10:00:30Z');
  const skiplock = skiplockAt(db.sql, clock);
  await skiplock.putSchedule('none-minutely', { cron: '* * * * *', task: 'noop', catchUp: 'none' });
  await skiplock.putSchedule('none-5min', { cron: '*/5 * * * *', task: 'noop', catchUp: 'none' });
  clock.set('2026-01-05T10:10:30Z');
  expect(await skiplock.fireDueSchedules()).toBe(2);
  // 10:10:00 is 30 s old: on time; 10:01 … 10:09 are skipped.
  expect(iso(await firings(db.sql, 'none-minutely'))).toEqual(['2026-01-05T10:10:00.000Z']);
  expect(iso(await firings(db.sql, 'none-5min'))).toEqual(['2026-01-05T10:10:00.000Z']);
  // 10:15 is missed by a tick at 10:18 (3 minutes late): skipped; 10:20 fires on time.
  clock.set('2026-01-05T10:18:00Z');
  await skiplock.fireDueSchedules();
  clock.set('2026-01-05T10:20:10Z');
  await skiplock.fireDueSchedules();
  expect(iso(await firings(db.sql, 'none-5min'))).toEqual(['2026-01-05T10:10:00.000Z', '2026-01-05T10:20:00.000Z']);
});

test('maxFiringsPerTick bounds one tick; the rest fire on the next ticks, in order', async () => {
  const clock = createClock('2026-01-05T10:00:30Z');
  const skiplock = skiplockAt(db.sql, clock);
  await skiplock.putSchedule('bounded', { cron: '* * * * *', task: 'noop', catchUp: 'all', maxFiringsPerTick: 4 });
  clock.set('2026-01-05T10:10:30Z');
  const fired: number[] = [];
  for (let i = 0; i < 4; i++) fired.push((await skiplock.tick({ untilIdle: true, reapIntervalMs: 0 })).fired);
  expect(fired).toEqual([4, 4, 2, 0]);
  expect(iso(await firings(db.sql, 'bounded'))).toEqual(minutes('2026-01-05T10:01:00Z', 10));
  // The ticks also ran them.
  expect((await scheduledJobs(db.sql, 'bounded')).every((j) => j.status === 'DONE')).toBe(true);
  const [info] = (await skiplock.listSchedules()).schedules.filter((s) => s.name === 'bounded');
  expect(info).toMatchObject({ nextRunAt: new Date('2026-01-05T10:11:00Z'), lastScheduledFor: new Date('2026-01-05T10:10:00Z'), lastStatus: 'DONE' });
});

test("the default bound is 100 per tick (a per-second schedule after a 5-minute gap)", async () => {
  const clock = createClock('2026-01-05T10:00:00.400Z');
  const skiplock = skiplockAt(db.sql, clock);
  await skiplock.putSchedule('per-second', { cron: '* * * * * *', task: 'noop', catchUp: 'all' });
  clock.set('2026-01-05T10:05:00.400Z');
  const fired = [];
  for (let i = 0; i < 4; i++) fired.push(await skiplock.fireDueSchedules());
  expect(fired).toEqual([100, 100, 100, 0]);
  const all = await firings(db.sql, 'per-second');
  expect(all.length).toBe(300);
  expect(all[0]!.scheduled_for.toISOString()).toBe('2026-01-05T10:00:01.000Z');
  expect(all.at(-1)!.scheduled_for.toISOString()).toBe('2026-01-05T10:05:00.000Z');
});
