/** Static schedules: checked at definition, stored by the tick only when their definition changes. */
import { afterAll, beforeAll, expect, test } from 'vitest';
import { z } from 'zod';
import { defineSchedule } from '../../src/runtime/schedules/definition.ts';
import { createSkiplock } from '../../src/runtime/skiplock.ts';
import { defineTask } from '../../src/runtime/tasks/task.ts';
import { statement, type Sql } from '../../src/store/sql.ts';
import { createTestDb, type TestDb } from '../support/db.ts';
import { createClock, firings, iso, MINUTE, noop, scheduledJobs, scheduleRow, skiplockAt } from './support.ts';

let db: TestDb;
beforeAll(async () => (db = await createTestDb()));
afterAll(() => db.drop());

test('bad definitions in code throw a TypeError at startup', () => {
  expect(() => defineSchedule({ name: 'bad', cron: '0 25 * * *', task: 'noop' })).toThrow(
    new TypeError('schedule bad: cron: invalid cron expression "0 25 * * *": Constraint error, got value 25 expected range 0-23'),
  );
  expect(() => defineSchedule({ name: 'bad', cron: '0 9 * * 1', tz: 'Europe/Osl', task: 'noop' })).toThrow(/^schedule bad: tz: unknown time zone "Europe\/Osl"/);
  expect(() => defineSchedule({ name: 'bad', cron: '', task: 'noop' })).toThrow('cron: must have 5 fields (minute hour day-of-month month day-of-week) or 6 (with seconds first), got 0');
  expect(() => defineSchedule({ name: 'bad', every: 500, task: 'noop' })).toThrow('every: must be a whole number of ms from 1000 (1 s)');
  expect(() => defineSchedule({ name: 'bad', every: '5m', tz: 'Europe/Oslo', task: 'noop' })).toThrow('tz: every is a fixed interval');
  expect(() => defineSchedule({ name: 'bad', task: 'noop' })).toThrow('schedule bad: (schedule): give one of cron, every, daily');
  expect(() => defineSchedule({ name: 'bad name', cron: '* * * * *', task: 'noop' })).toThrow(TypeError);
  // With the task itself, the payload is checked right away.
  expect(() => defineSchedule({ name: 'bad', cron: '* * * * *', task: noop, payload: { n: 'x' } })).toThrow(/^schedule bad: payload\.n: /);
  // With its name, when createSkiplock knows the tasks.
  const sql = db.sql;
  expect(() => createSkiplock({ sql, tasks: [noop], schedules: [defineSchedule({ name: 'x', cron: '* * * * *', task: 'nope' })] })).toThrow(
    'schedule x: unknown task "nope"; add it to createSkiplock({ tasks })',
  );
  expect(() => createSkiplock({ sql, tasks: [noop], schedules: [defineSchedule({ name: 'x', cron: '* * * * *', task: 'noop', payload: { m: 1 } })] })).toThrow(TypeError);
  const twice = defineSchedule({ name: 'x', cron: '* * * * *', task: 'noop' });
  expect(() => createSkiplock({ sql, tasks: [noop], schedules: [twice, twice] })).toThrow('schedule x is defined twice');
});

test('valid definitions: 5 or 6 fields, @aliases, intervals, daily times', () => {
  expect(defineSchedule({ name: 'a', cron: ' 0  9 * * 1 ', tz: 'America/New_York', task: 'noop' }).timing).toEqual({ cron: '0 9 * * 1', everyMs: null, daily: null, tz: 'America/New_York' });
  expect(defineSchedule({ name: 'a', cron: '*/5 * * * * *', task: 'noop' }).timing.cron).toBe('*/5 * * * * *');
  expect(defineSchedule({ name: 'a', cron: '@hourly', task: 'noop' }).timing.cron).toBe('@hourly');
  expect(defineSchedule({ name: 'a', every: '1h30m', task: 'noop' }).timing.everyMs).toBe(5_400_000);
  expect(defineSchedule({ name: 'a', daily: ['14:00', '02:30:00', '02:30'], task: 'noop' }).timing.daily).toEqual(['02:30', '14:00']);
  expect(defineSchedule({ name: 'a', cron: '* * * * *', task: noop })).toMatchObject({ task: 'noop', payload: {}, catchUp: 'latest', overlap: 'allow', maxFiringsPerTick: 100, enabled: true });
});

test('the tick stores a static schedule once and rewrites it only when its definition changes', async () => {
  const clock = createClock('2026-01-05T10:00:30Z');
  const v1 = [defineSchedule({ name: 'report', cron: '*/5 * * * *', task: 'noop', payload: { n: 1 } })];
  const first = skiplockAt(db.sql, clock, { schedules: v1 });
  expect((await first.listSchedules()).schedules.map((s) => [s.name, s.source, s.nextRunAt])).toEqual([['report', 'static', null]]); // not stored yet
  await first.fireDueSchedules();
  const stored = await scheduleRow(db.sql, 'report');
  expect(stored).toMatchObject({ source: 'static', revision: 1, watermark: new Date('2026-01-05T10:00:30Z'), next_run_at: new Date('2026-01-05T10:05:00Z') });

  // Another invocation with the same code: nothing is written.
  clock.set('2026-01-05T10:02:00Z');
  await skiplockAt(db.sql, clock, { schedules: v1 }).fireDueSchedules();
  expect(await scheduleRow(db.sql, 'report')).toEqual(stored);

  // A deploy changes it: one new revision, the watermark kept.
  const v2 = [defineSchedule({ name: 'report', cron: '* * * * *', task: 'noop', payload: { n: 2 }, catchUp: 'all' })];
  const second = skiplockAt(db.sql, clock, { schedules: v2 });
  expect(await second.fireDueSchedules()).toBe(2); // 10:01, 10:02 under the new definition
  expect(await scheduleRow(db.sql, 'report')).toMatchObject({ revision: 2, cron: '* * * * *', payload: { n: 2 }, created_at: stored!.created_at });
  expect((await scheduledJobs(db.sql, 'report')).length).toBe(2);

  // A deployment that no longer defines it leaves it alone: it neither fires nor lists it.
  clock.set('2026-01-05T10:10:00Z');
  const without = skiplockAt(db.sql, clock);
  expect(await without.fireDueSchedules()).toBe(0);
  expect(await without.listSchedules()).toEqual({ schedules: [], nextCursor: null });
  expect(iso(await firings(db.sql, 'report'))).toEqual(['2026-01-05T10:01:00.000Z', '2026-01-05T10:02:00.000Z']);
});

test('a firing that already exists is not fired again and leaves no job behind', async () => {
  const clock = createClock('2026-01-05T10:00:30Z');
  const skiplock = skiplockAt(db.sql, clock);
  await skiplock.putSchedule('guarded', { cron: '* * * * *', task: 'noop', catchUp: 'all' });
  // Someone (an older version, a restore) already recorded 10:02 without the watermark moving.
  await db.sql.query(statement(`INSERT INTO skiplock.cron_firing (schedule_name, scheduled_for, fired_at) VALUES ('guarded', '2026-01-05T10:02:00Z', now())`));
  clock.set('2026-01-05T10:03:30Z');
  expect(await skiplock.fireDueSchedules()).toBe(2);
  const fired = await firings(db.sql, 'guarded');
  expect(fired.map((f) => [f.scheduled_for.toISOString(), f.job_id !== null])).toEqual([
    ['2026-01-05T10:01:00.000Z', true],
    ['2026-01-05T10:02:00.000Z', false],
    ['2026-01-05T10:03:00.000Z', true],
  ]);
  expect(iso(await scheduledJobs(db.sql, 'guarded'))).toEqual(['2026-01-05T10:01:00.000Z', '2026-01-05T10:03:00.000Z']);
});

test('a schedule whose task this deployment lacks is not fired by it', async () => {
  const clock = createClock('2026-01-05T10:00:30Z');
  const other = defineTask({ name: 'elsewhere', payload: z.object({}), handler: () => null });
  await skiplockAt(db.sql, clock, { tasks: [noop, other] }).putSchedule('foreign', { cron: '* * * * *', task: 'elsewhere' });
  const warnings: string[] = [];
  const skiplock = skiplockAt(db.sql, clock, { log: (_level, message) => warnings.push(message) });
  clock.advance(2 * MINUTE);
  await skiplock.fireDueSchedules();
  expect(await firings(db.sql, 'foreign')).toEqual([]);
  expect(warnings).toEqual(['schedule not fired: its task is not registered in this deployment']);
  // Said once: each tick fires every second, and a warning a second is noise that hides the rest.
  for (let i = 0; i < 3; i++) {
    clock.advance(MINUTE);
    await skiplock.fireDueSchedules();
  }
  expect(warnings).toHaveLength(1);
});

test('a schedule defined in code takes over a dynamic one of the same name, and says so once', async () => {
  const clock = createClock('2026-01-05T10:00:30Z');
  await skiplockAt(db.sql, clock).putSchedule('nightly', { cron: '0 3 * * *', task: 'noop', payload: { n: 1 } });
  const before = await scheduleRow(db.sql, 'nightly');

  // A deploy now defines 'nightly' in code: the code is what the team reviews and ships, and this
  // deployment refuses to put or delete that name, so leaving the row dynamic would keep firing a
  // definition nobody can see or change from here, while the code's was silently ignored.
  const warnings: { message: string; fields: unknown }[] = [];
  const code = [defineSchedule({ name: 'nightly', cron: '* * * * *', task: 'noop', payload: { n: 2 } })];
  const log = (_level: string, message: string, fields?: Record<string, unknown>) => {
    if (fields?.schedule === 'nightly') warnings.push({ message, fields });
  };
  const deployed = skiplockAt(db.sql, clock, { schedules: code, log });
  clock.advance(2 * MINUTE);
  expect(await deployed.fireDueSchedules()).toBe(1); // 10:02, under the code's definition (catch-up latest)
  expect(await scheduleRow(db.sql, 'nightly')).toMatchObject({
    source: 'static',
    cron: '* * * * *',
    payload: { n: 2 },
    revision: Number(before!.revision) + 1,
    created_at: before!.created_at,
  });
  expect(warnings).toEqual([{ message: 'a schedule defined in code replaced the dynamic schedule of the same name', fields: { schedule: 'nightly' } }]);
  clock.advance(MINUTE);
  await deployed.fireDueSchedules();
  expect(warnings).toHaveLength(1);
  expect((await deployed.listSchedules()).schedules.find((s) => s.name === 'nightly')?.source).toBe('static');
});

test('a static schedule removed from the code and added back later restarts from then, as a re-enabled one does', async () => {
  const clock = createClock('2026-01-05T10:00:05Z');
  const code = [defineSchedule({ name: 'removed', cron: '*/10 * * * * *', task: 'noop', catchUp: 'all' })];
  // Counted by firings of this schedule: fireDueSchedules also fires the other tests' dynamic ones.
  const fired = async () => (await firings(db.sql, 'removed')).length;
  await skiplockAt(db.sql, clock, { schedules: code }).fireDueSchedules();
  clock.set('2026-01-05T10:00:25Z');
  await skiplockAt(db.sql, clock, { schedules: code }).fireDueSchedules();
  expect(await fired()).toBe(2); // :10, :20

  // A deploy drops it: the first tick of a deployment that has its task but not its definition
  // notes when it went missing.
  clock.set('2026-01-05T10:02:00Z');
  await skiplockAt(db.sql, clock).fireDueSchedules();
  expect(await fired()).toBe(2);
  expect(await scheduleRow(db.sql, 'removed')).toMatchObject({ missing_since: new Date('2026-01-05T10:02:00Z') });

  // A day later it is back in the code: it starts from now instead of firing every instant since
  // (8,600 of them, 100 a tick).
  clock.set('2026-01-06T10:00:05Z');
  const back = skiplockAt(db.sql, clock, { schedules: code });
  await back.fireDueSchedules();
  expect(await fired()).toBe(2);
  expect(await scheduleRow(db.sql, 'removed')).toMatchObject({ missing_since: null, watermark: new Date('2026-01-06T10:00:05Z') });
  clock.set('2026-01-06T10:00:25Z');
  await back.fireDueSchedules();
  expect(await fired()).toBe(4);
  expect(iso(await firings(db.sql, 'removed')).slice(-2)).toEqual(['2026-01-06T10:00:10.000Z', '2026-01-06T10:00:20.000Z']);
});

test('a static schedule missing only briefly (a rolling deploy: old and new versions tick side by side) keeps its progress', async () => {
  const clock = createClock('2026-01-05T10:00:05Z');
  const code = [defineSchedule({ name: 'rolling', cron: '*/10 * * * * *', task: 'noop', catchUp: 'all' })];
  const withIt = skiplockAt(db.sql, clock, { schedules: code });
  const without = skiplockAt(db.sql, clock);
  await withIt.fireDueSchedules();
  // The version without it ticks in between: nothing is noted within a minute of the row's last write…
  clock.set('2026-01-05T10:00:30Z');
  await without.fireDueSchedules();
  expect(await scheduleRow(db.sql, 'rolling')).toMatchObject({ missing_since: null });
  // …and then at most once until the version with it ticks again.
  clock.set('2026-01-05T10:01:30Z');
  await without.fireDueSchedules();
  const marked = await scheduleRow(db.sql, 'rolling');
  expect(marked).toMatchObject({ missing_since: new Date('2026-01-05T10:01:30Z') });
  clock.set('2026-01-05T10:01:40Z');
  await without.fireDueSchedules();
  expect(await scheduleRow(db.sql, 'rolling')).toEqual(marked);
  // Back within the grace: every instant since its watermark fires, as after any pause.
  clock.set('2026-01-05T10:03:05Z');
  await withIt.fireDueSchedules();
  expect((await firings(db.sql, 'rolling')).length).toBe(18); // 10:00:10 … 10:03:00
  expect(await scheduleRow(db.sql, 'rolling')).toMatchObject({ missing_since: null });
});

test('a deployment without the task of a static schedule (another service on the same database) never marks it missing', async () => {
  const clock = createClock('2026-01-05T10:00:05Z');
  const other = defineTask({ name: 'other-service', payload: z.object({}), handler: () => null });
  const code = [defineSchedule({ name: 'theirs', cron: '*/10 * * * * *', task: 'other-service', catchUp: 'all' })];
  await skiplockAt(db.sql, clock, { tasks: [other], schedules: code }).fireDueSchedules();
  clock.set('2026-01-05T11:00:00Z');
  await skiplockAt(db.sql, clock).fireDueSchedules(); // this service: task noop only
  expect(await scheduleRow(db.sql, 'theirs')).toMatchObject({ missing_since: null });
  // The other service was down for an hour: catch-up 'all' fires what it missed, 100 a tick.
  await skiplockAt(db.sql, clock, { tasks: [other], schedules: code }).fireDueSchedules();
  expect((await firings(db.sql, 'theirs')).length).toBe(100);
});

test('a dynamic schedule put over a static one long missing from the code starts from now too', async () => {
  const clock = createClock('2026-01-05T10:00:05Z');
  const code = [defineSchedule({ name: 'handed-over', cron: '*/10 * * * * *', task: 'noop', catchUp: 'all' })];
  await skiplockAt(db.sql, clock, { schedules: code }).fireDueSchedules();
  clock.set('2026-01-05T10:02:00Z');
  await skiplockAt(db.sql, clock).fireDueSchedules(); // noted missing
  clock.set('2026-01-06T10:00:05Z');
  const { schedule } = await skiplockAt(db.sql, clock).putSchedule('handed-over', { cron: '*/10 * * * * *', task: 'noop', catchUp: 'all' });
  expect(schedule.source).toBe('dynamic');
  expect(await scheduleRow(db.sql, 'handed-over')).toMatchObject({ missing_since: null, watermark: new Date('2026-01-06T10:00:05Z') });
});

test('a later tick of the same instance does not read the schedules at its start, and still fires what falls due', async () => {
  await db.emptyJobs('skiplock.schedule');
  const clock = createClock('2026-01-05T11:00:30Z');
  const reads: string[] = [];
  const sql: Sql = { ...db.sql, query: (s) => (s.text.includes('jsonb_to_recordset($2::jsonb) AS d(') && reads.push(clock.now().toISOString()), db.sql.query(s)) };
  const skiplock = skiplockAt(sql, clock, { schedules: [defineSchedule({ name: 'hourly-11', cron: '5 * * * *', task: 'noop' })] });
  expect(await skiplock.tick({ untilIdle: true })).toMatchObject({ fired: 0 });
  expect(reads).toHaveLength(1); // the first tick reads them, and so writes the definition
  expect(await skiplock.tick({ untilIdle: true })).toMatchObject({ fired: 0 });
  expect(reads).toHaveLength(1); // nothing due: its claim said so, no read
  clock.set('2026-01-05T11:05:10Z');
  expect(await skiplock.tick({ untilIdle: true })).toMatchObject({ fired: 1, done: 1 }); // its claim said one is due
  expect(reads).toHaveLength(2);
  expect(iso(await firings(db.sql, 'hourly-11'))).toEqual(['2026-01-05T11:05:00.000Z']);
});
