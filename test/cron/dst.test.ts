/**
 * Time zones and daylight saving time, fired through the database with the clock passed in.
 *
 * Europe/Oslo 2026: on Mar 29 clocks jump 02:00 → 03:00 CEST, so 02:30 does not exist that day —
 * a daily 02:30 fires once, at 03:30 CEST (01:30 UTC). On Oct 25 clocks fall back 03:00 → 02:00,
 * so 02:30 happens twice — it fires once, at the first (02:30 CEST, 00:30 UTC). Both hold
 * however the ticks fall, including ticks inside the changing hour.
 */
import { afterAll, beforeAll, expect, test } from 'vitest';
import type { Skiplock } from '../../src/runtime/skiplock.ts';
import { createTestDb, type TestDb } from '../support/db.ts';
import { createClock, firings, iso, MINUTE, scheduledJobs, skiplockAt } from './support.ts';

let db: TestDb;
beforeAll(async () => (db = await createTestDb()));
afterAll(() => db.drop());

/** Fires every `stepMs` from `from` to `to`, as a platform cron would. */
async function tickThrough(skiplock: Skiplock, clock: ReturnType<typeof createClock>, from: string, to: string, stepMs: number) {
  for (let t = new Date(from).getTime(); t <= new Date(to).getTime(); t += stepMs) {
    clock.set(new Date(t));
    await skiplock.fireDueSchedules();
  }
}

test('a daily 02:30 in Europe/Oslo across both 2026 transitions, ticking every 7 minutes', async () => {
  const clock = createClock('2026-03-26T12:00:00Z');
  const skiplock = skiplockAt(db.sql, clock);
  await skiplock.putSchedule('oslo-spring-daily', { daily: ['02:30'], tz: 'Europe/Oslo', task: 'noop', catchUp: 'all' });
  await skiplock.putSchedule('oslo-spring-cron', { cron: '30 2 * * *', tz: 'Europe/Oslo', task: 'noop', catchUp: 'latest' });
  await tickThrough(skiplock, clock, '2026-03-26T12:00:00Z', '2026-03-31T00:00:00Z', 7 * MINUTE + 3000);
  const spring = [
    '2026-03-27T01:30:00.000Z', // 02:30 CET
    '2026-03-28T01:30:00.000Z',
    '2026-03-29T01:30:00.000Z', // 02:30 does not exist: fired at 03:30 CEST
    '2026-03-30T00:30:00.000Z', // 02:30 CEST
  ];
  expect(iso(await firings(db.sql, 'oslo-spring-daily'))).toEqual(spring);
  expect(iso(await firings(db.sql, 'oslo-spring-cron'))).toEqual(spring);

  clock.set('2026-10-22T12:00:00Z');
  await skiplock.putSchedule('oslo-autumn-daily', { daily: ['02:30'], tz: 'Europe/Oslo', task: 'noop', catchUp: 'all' });
  await skiplock.putSchedule('oslo-autumn-cron', { cron: '30 2 * * *', tz: 'Europe/Oslo', task: 'noop', catchUp: 'latest' });
  await tickThrough(skiplock, clock, '2026-10-22T12:00:00Z', '2026-10-27T00:00:00Z', 7 * MINUTE + 3000);
  const autumn = [
    '2026-10-23T00:30:00.000Z', // 02:30 CEST
    '2026-10-24T00:30:00.000Z',
    '2026-10-25T00:30:00.000Z', // the first 02:30 (CEST); not again at 02:30 CET, 01:30 UTC
    '2026-10-26T01:30:00.000Z', // 02:30 CET
  ];
  expect(iso(await firings(db.sql, 'oslo-autumn-daily'))).toEqual(autumn);
  expect(iso(await firings(db.sql, 'oslo-autumn-cron'))).toEqual(autumn);
});

test('the same instants when the only ticks fall inside the changing hour', async () => {
  const clock = createClock('2026-10-24T12:00:00Z');
  const skiplock = skiplockAt(db.sql, clock);
  await skiplock.putSchedule('oslo-inside', { daily: ['02:30'], tz: 'Europe/Oslo', task: 'noop', catchUp: 'all' });
  // 00:45 UTC is 02:45 CEST; 01:10 UTC is 02:10 CET, the repeated hour; then the next day.
  for (const at of ['2026-10-25T00:45:00Z', '2026-10-25T01:10:00Z', '2026-10-25T01:40:00Z', '2026-10-26T12:00:00Z']) {
    clock.set(at);
    await skiplock.fireDueSchedules();
  }
  expect(iso(await firings(db.sql, 'oslo-inside'))).toEqual(['2026-10-25T00:30:00.000Z', '2026-10-26T01:30:00.000Z']);

  clock.set('2026-03-28T12:00:00Z');
  await skiplock.putSchedule('oslo-spring', { daily: ['02:30'], tz: 'Europe/Oslo', task: 'noop', catchUp: 'latest' });
  // 01:10 UTC is 03:10 CEST, just after the jump: the shifted 03:30 CEST is still to come.
  for (const at of ['2026-03-29T01:10:00Z', '2026-03-29T01:35:00Z', '2026-03-29T05:00:00Z']) {
    clock.set(at);
    await skiplock.fireDueSchedules();
  }
  expect(iso(await firings(db.sql, 'oslo-spring'))).toEqual(['2026-03-29T01:30:00.000Z']);
});

test("'0 9 * * 1' in America/New_York stays at 09:00 local across both DST changes", async () => {
  const clock = createClock('2026-02-27T00:00:00Z');
  const skiplock = skiplockAt(db.sql, clock);
  await skiplock.putSchedule('ny-spring', { cron: '0 9 * * 1', tz: 'America/New_York', task: 'noop' });
  await tickThrough(skiplock, clock, '2026-02-27T00:00:00Z', '2026-03-24T00:00:00Z', 61 * MINUTE);
  // Jobs, not firings: firing history older than 7 days is pruned as the schedule fires on.
  expect(iso(await scheduledJobs(db.sql, 'ny-spring'))).toEqual([
    '2026-03-02T14:00:00.000Z', // EST, UTC−5
    '2026-03-09T13:00:00.000Z', // EDT from Mar 8, UTC−4
    '2026-03-16T13:00:00.000Z',
    '2026-03-23T13:00:00.000Z',
  ]);
  clock.set('2026-10-20T00:00:00Z');
  await skiplock.putSchedule('ny-autumn', { cron: '0 9 * * 1', tz: 'America/New_York', task: 'noop' });
  await tickThrough(skiplock, clock, '2026-10-20T00:00:00Z', '2026-11-10T00:00:00Z', 61 * MINUTE);
  expect(iso(await scheduledJobs(db.sql, 'ny-autumn'))).toEqual([
    '2026-10-26T13:00:00.000Z', // EDT
    '2026-11-02T14:00:00.000Z', // EST from Nov 1
    '2026-11-09T14:00:00.000Z',
  ]);
});

test('6-field (per-second) schedules', async () => {
  const clock = createClock('2026-01-05T12:00:00.500Z');
  const skiplock = skiplockAt(db.sql, clock);
  await skiplock.putSchedule('every-15s', { cron: '*/15 * * * * *', task: 'noop', catchUp: 'all' });
  await skiplock.putSchedule('every-second', { cron: '* * * * * *', task: 'noop', catchUp: 'all' });
  await skiplock.putSchedule('second-7', { cron: '7 * * * * *', task: 'noop', catchUp: 'latest' });
  clock.set('2026-01-05T12:01:00.200Z');
  await skiplock.fireDueSchedules();
  expect(iso(await firings(db.sql, 'every-15s'))).toEqual([
    '2026-01-05T12:00:15.000Z',
    '2026-01-05T12:00:30.000Z',
    '2026-01-05T12:00:45.000Z',
    '2026-01-05T12:01:00.000Z',
  ]);
  expect(await firings(db.sql, 'every-second')).toHaveLength(60);
  expect(iso(await firings(db.sql, 'second-7'))).toEqual(['2026-01-05T12:00:07.000Z']);
  clock.set('2026-01-05T12:01:03.900Z');
  await skiplock.fireDueSchedules();
  expect(await firings(db.sql, 'every-second')).toHaveLength(63);
});
