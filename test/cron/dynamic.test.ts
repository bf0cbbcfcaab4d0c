/** Dynamic schedules: put, replace, delete, list; bad input refused with a clear error, writing nothing. */
import { afterAll, beforeAll, expect, test } from 'vitest';
import { SkiplockError } from '../../src/core/errors.ts';
import { defineSchedule } from '../../src/runtime/schedules/definition.ts';
import { statement } from '../../src/store/sql.ts';
import { createTestDb, type TestDb } from '../support/db.ts';
import { createClock, firings, iso, scheduledJobs, scheduleRow, skiplockAt } from './support.ts';

let db: TestDb;
beforeAll(async () => (db = await createTestDb()));
afterAll(() => db.drop());

async function refusal(promise: Promise<unknown>): Promise<SkiplockError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(SkiplockError);
  return error as SkiplockError;
}

test('put creates, a second put replaces (keeping watermark and history), delete removes', async () => {
  const clock = createClock('2026-01-05T10:00:30Z');
  const skiplock = skiplockAt(db.sql, clock);
  const put = await skiplock.putSchedule('tenant-7', { cron: '*/10 * * * *', tz: 'Europe/Oslo', task: 'noop', payload: { n: 7 } });
  expect(put.created).toBe(true);
  expect(put.schedule).toMatchObject({
    name: 'tenant-7',
    source: 'dynamic',
    cron: '*/10 * * * *',
    tz: 'Europe/Oslo',
    task: 'noop',
    payload: { n: 7 },
    enabled: true,
    catchUp: 'latest',
    overlap: 'allow',
    nextRunAt: new Date('2026-01-05T10:10:00Z'),
    lastFiredAt: null,
    lastStatus: null,
    state: null,
  });

  clock.set('2026-01-05T10:10:05Z');
  expect(await skiplock.fireDueSchedules()).toBe(1);
  const [job] = await scheduledJobs(db.sql, 'tenant-7');
  expect(await skiplock.getJob(job!.id)).toMatchObject({ task: 'noop', payload: { n: 7 }, scheduleName: 'tenant-7', scheduledFor: new Date('2026-01-05T10:10:00Z') });

  // The same definition again changes nothing.
  const before = await scheduleRow(db.sql, 'tenant-7');
  expect((await skiplock.putSchedule('tenant-7', { cron: '*/10 * * * *', tz: 'Europe/Oslo', task: 'noop', payload: { n: 7 } })).created).toBe(false);
  expect(await scheduleRow(db.sql, 'tenant-7')).toEqual(before);

  // Replace: every minute now. The watermark (10:10:05) and the history stay.
  const replaced = await skiplock.putSchedule('tenant-7', { cron: '* * * * *', task: 'noop', payload: { n: 8 } });
  expect(replaced.created).toBe(false);
  expect(replaced.schedule).toMatchObject({ cron: '* * * * *', tz: 'UTC', payload: { n: 8 }, nextRunAt: new Date('2026-01-05T10:11:00Z'), lastScheduledFor: new Date('2026-01-05T10:10:00Z') });
  expect(await scheduleRow(db.sql, 'tenant-7')).toMatchObject({ revision: Number(before!.revision) + 1, watermark: before!.watermark });
  clock.set('2026-01-05T10:11:05Z');
  await skiplock.fireDueSchedules();
  expect(iso(await firings(db.sql, 'tenant-7'))).toEqual(['2026-01-05T10:10:00.000Z', '2026-01-05T10:11:00.000Z']);
  expect((await scheduledJobs(db.sql, 'tenant-7')).at(-1)).toMatchObject({ status: 'QUEUED' });

  // Delete: the schedule and its firings go, its jobs stay; nothing fires any more.
  expect(await skiplock.deleteSchedule('tenant-7')).toBe(true);
  expect(await skiplock.deleteSchedule('tenant-7')).toBe(false);
  // A name no schedule can have (here one PostgreSQL cannot even store) is simply not there.
  expect(await skiplock.deleteSchedule('bad\u0000name')).toBe(false);
  expect(await firings(db.sql, 'tenant-7')).toEqual([]);
  expect(await scheduledJobs(db.sql, 'tenant-7')).toHaveLength(2);
  clock.set('2026-01-05T10:20:05Z');
  await skiplock.fireDueSchedules();
  expect(await scheduledJobs(db.sql, 'tenant-7')).toHaveLength(2);
  expect((await skiplock.listSchedules()).schedules.map((s) => s.name)).not.toContain('tenant-7');
});

test('every and daily schedules', async () => {
  const clock = createClock('2026-01-05T10:00:30Z');
  const skiplock = skiplockAt(db.sql, clock);
  expect((await skiplock.putSchedule('quarter-hourly', { every: '15m', task: 'noop', catchUp: 'all' })).schedule).toMatchObject({ every: 900_000, cron: null, nextRunAt: new Date('2026-01-05T10:15:00Z') });
  await skiplock.putSchedule('twice-daily', { daily: ['14:00', '02:30'], tz: 'Asia/Tokyo', task: 'noop', catchUp: 'all' });
  clock.set('2026-01-06T10:00:30Z');
  await skiplock.fireDueSchedules();
  expect(await firings(db.sql, 'quarter-hourly')).toHaveLength(4 * 24);
  // 02:30 and 14:00 in Tokyo (UTC+9): 17:30 and 05:00 UTC.
  expect(iso(await firings(db.sql, 'twice-daily'))).toEqual(['2026-01-05T17:30:00.000Z', '2026-01-06T05:00:00.000Z']);
  expect((await skiplock.listSchedules()).schedules.find((s) => s.name === 'twice-daily')).toMatchObject({ daily: ['02:30', '14:00'], nextRunAt: new Date('2026-01-06T17:30:00Z') });
});

test('invalid schedules are refused with a clear error and write nothing', async () => {
  const clock = createClock('2026-01-05T10:00:30Z');
  const skiplock = skiplockAt(db.sql, clock, { schedules: [defineSchedule({ name: 'in-code', cron: '0 * * * *', task: 'noop' })] });
  const countRows = async () => (await db.sql.query(statement(`SELECT count(*)::int AS n FROM skiplock.schedule`)))[0]!.n;
  const rows = await countRows();

  let error = await refusal(skiplock.putSchedule('bad-cron', { cron: '61 * * * *', task: 'noop' }));
  expect(error).toMatchObject({ code: 'invalid_request', issues: [{ path: ['cron'], message: expect.stringContaining('61') }] });
  error = await refusal(skiplock.putSchedule('bad-fields', { cron: '* * * *', task: 'noop' }));
  expect(error.issues).toEqual([{ path: ['cron'], message: expect.stringContaining('got 4') }]);
  error = await refusal(skiplock.putSchedule('bad-tz', { cron: '0 9 * * 1', tz: 'Mars/Olympus_Mons', task: 'noop' }));
  expect(error).toMatchObject({ code: 'invalid_request', issues: [{ path: ['tz'], message: expect.stringContaining('unknown time zone "Mars/Olympus_Mons"') }] });
  error = await refusal(skiplock.putSchedule('two-timings', { cron: '* * * * *', every: '1m', task: 'noop' }));
  expect(error.issues).toEqual([{ path: ['every'], message: 'give only one of cron, every, daily (got cron, every)' }]);
  error = await refusal(skiplock.putSchedule('bad-every', { every: '10x', task: 'noop' }));
  expect(error.issues?.[0]?.path).toEqual(['every']);
  error = await refusal(skiplock.putSchedule('bad-daily', { daily: ['24:00'], task: 'noop' }));
  expect(error.issues?.[0]).toMatchObject({ path: ['daily'], message: expect.stringContaining('"24:00"') });
  error = await refusal(skiplock.putSchedule('bad-policy', { cron: '* * * * *', task: 'noop', catchUp: 'some' as never }));
  expect(error.issues?.[0]?.path).toEqual(['catchUp']);
  error = await refusal(skiplock.putSchedule('no task', { cron: '* * * * *', task: 'noop' }));
  expect(error).toMatchObject({ code: 'invalid_request', issues: [{ path: ['name'] }] });
  error = await refusal(skiplock.putSchedule('unknown-task', { cron: '* * * * *', task: 'nope' }));
  expect(error).toMatchObject({ code: 'unknown_task', message: 'unknown task "nope"' });
  error = await refusal(skiplock.putSchedule('bad-payload', { cron: '* * * * *', task: 'noop', payload: { n: 'seven' } }));
  expect(error).toMatchObject({ code: 'invalid_payload', issues: [{ path: ['payload', 'n'] }] });
  error = await refusal(skiplock.putSchedule('in-code', { cron: '* * * * *', task: 'noop' }));
  expect(error).toMatchObject({ code: 'conflict', message: 'schedule in-code is defined in code; change it there' });
  error = await refusal(skiplock.deleteSchedule('in-code'));
  expect(error.code).toBe('conflict');

  expect(await countRows()).toBe(rows);
});
