/** overlap 'skip' and disabled schedules. */
import { afterAll, beforeAll, expect, test } from 'vitest';
import { z } from 'zod';
import { defineSchedule } from '../../src/runtime/schedules/definition.ts';
import { defineTask } from '../../src/runtime/tasks/task.ts';
import { createTestDb, type TestDb } from '../support/db.ts';
import { createClock, firings, iso, noop, scheduledJobs, scheduleRow, skiplockAt } from './support.ts';

let db: TestDb;
beforeAll(async () => (db = await createTestDb()));
afterAll(() => db.drop());

test("overlap 'skip' fires nothing while the previous job is QUEUED or RUNNING", async () => {
  const clock = createClock('2026-01-05T10:00:30Z');
  const skiplock = skiplockAt(db.sql, clock);
  await skiplock.putSchedule('skip', { cron: '* * * * *', task: 'noop', overlap: 'skip' });
  await skiplock.putSchedule('allow', { cron: '* * * * *', task: 'noop' });

  clock.set('2026-01-05T10:01:05Z');
  expect(await skiplock.fireDueSchedules()).toBe(2);
  clock.set('2026-01-05T10:02:05Z'); // the 10:01 jobs are still QUEUED
  expect(await skiplock.fireDueSchedules()).toBe(1);
  expect(iso(await firings(db.sql, 'skip'))).toEqual(['2026-01-05T10:01:00.000Z']);
  expect(iso(await firings(db.sql, 'allow'))).toEqual(['2026-01-05T10:01:00.000Z', '2026-01-05T10:02:00.000Z']);
  // The skipped instant is settled, not postponed.
  expect(await scheduleRow(db.sql, 'skip')).toMatchObject({ watermark: new Date('2026-01-05T10:02:05Z'), next_run_at: new Date('2026-01-05T10:03:00Z') });

  // A RUNNING job blocks too: claim it without finishing (a tick whose handler is still running).
  await db.sql.query({ text: `UPDATE skiplock.job SET status = 'RUNNING', attempts = 1, locked_by = 'w', locked_until = now() + interval '1 hour' WHERE schedule_name = 'skip'`, values: [] });
  clock.set('2026-01-05T10:03:05Z');
  await skiplock.fireDueSchedules();
  expect(iso(await firings(db.sql, 'skip'))).toEqual(['2026-01-05T10:01:00.000Z']);

  // Once it finished, the next instant fires.
  await db.sql.query({ text: `UPDATE skiplock.job SET status = 'DONE', locked_by = NULL, locked_until = NULL, finished_at = now() WHERE schedule_name = 'skip'`, values: [] });
  clock.set('2026-01-05T10:04:05Z');
  await skiplock.fireDueSchedules();
  expect(iso(await firings(db.sql, 'skip'))).toEqual(['2026-01-05T10:01:00.000Z', '2026-01-05T10:04:00.000Z']);
});

test("overlap 'skip' with catchUp 'all' catches up one instant at a time, each after the previous job", async () => {
  const clock = createClock('2026-01-05T10:00:30Z');
  const skiplock = skiplockAt(db.sql, clock);
  await skiplock.putSchedule('serial', { cron: '* * * * *', task: 'noop', overlap: 'skip', catchUp: 'all' });
  clock.set('2026-01-05T10:03:30Z');
  expect(await skiplock.fireDueSchedules()).toBe(1);
  expect(await skiplock.fireDueSchedules()).toBe(0); // 10:01's job is QUEUED: 10:02 and 10:03 are skipped
  expect(iso(await firings(db.sql, 'serial'))).toEqual(['2026-01-05T10:01:00.000Z']);

  await skiplockAt(db.sql, clock).putSchedule('serial-run', { cron: '* * * * *', task: 'noop', overlap: 'skip', catchUp: 'all' });
  clock.set('2026-01-05T10:07:30Z');
  // Each tick fires one instant, then runs its job; the next tick fires the next instant.
  // (Other schedules of this file share the database: count this one's firings.)
  const fired = [];
  for (let i = 0; i < 5; i++) {
    await skiplock.tick({ untilIdle: true, reapIntervalMs: 0 });
    fired.push((await firings(db.sql, 'serial-run')).length);
  }
  expect(fired).toEqual([1, 2, 3, 4, 4]);
  expect((await scheduledJobs(db.sql, 'serial-run')).map((j) => j.status)).toEqual(Array(4).fill('DONE'));
  expect(iso(await firings(db.sql, 'serial-run'))).toEqual([
    '2026-01-05T10:04:00.000Z',
    '2026-01-05T10:05:00.000Z',
    '2026-01-05T10:06:00.000Z',
    '2026-01-05T10:07:00.000Z',
  ]);
});

test('a disabled schedule fires nothing; re-enabled, it starts from then without catching up', async () => {
  const clock = createClock('2026-01-05T10:00:30Z');
  const schedules = [defineSchedule({ name: 'static-off', cron: '* * * * *', task: 'noop', enabled: false, catchUp: 'all' })];
  const skiplock = skiplockAt(db.sql, clock, { schedules });
  await skiplock.putSchedule('dynamic-off', { cron: '* * * * *', task: 'noop', enabled: false, catchUp: 'all' });
  for (let i = 0; i < 5; i++) {
    clock.advance(60_000);
    await skiplock.tick({ untilIdle: true, reapIntervalMs: 0 });
  }
  expect(await firings(db.sql, 'static-off')).toEqual([]);
  expect(await scheduledJobs(db.sql, 'dynamic-off')).toEqual([]);
  const listed = (await skiplock.listSchedules()).schedules.filter((s) => s.name.endsWith('-off'));
  expect(listed.map((s) => [s.name, s.enabled, s.nextRunAt])).toEqual([
    ['dynamic-off', false, null],
    ['static-off', false, null],
  ]);

  // 10:05:30: enabled again. 10:01 … 10:05 passed while it was disabled: not caught up.
  await skiplock.putSchedule('dynamic-off', { cron: '* * * * *', task: 'noop', enabled: true, catchUp: 'all' });
  const enabled = skiplockAt(db.sql, clock, { schedules: [defineSchedule({ name: 'static-off', cron: '* * * * *', task: 'noop', catchUp: 'all' })] });
  await enabled.fireDueSchedules();
  clock.set('2026-01-05T10:06:10Z');
  await enabled.fireDueSchedules();
  expect(iso(await firings(db.sql, 'static-off'))).toEqual(['2026-01-05T10:06:00.000Z']);
  expect(iso(await firings(db.sql, 'dynamic-off'))).toEqual(['2026-01-05T10:06:00.000Z']);
});

test("overlap 'skip' fires nothing while the previous run is WAITING for its children", async () => {
  const clock = createClock('2026-02-05T10:00:30Z');
  const child = defineTask({ name: 'overlap-child', payload: z.object({}), handler: () => 'child' });
  const flow = defineTask({ name: 'overlap-flow', payload: z.object({}), handler: async (_p, ctx) => ctx.invoke('child', 'overlap-child', {}) });
  const skiplock = skiplockAt(db.sql, clock, { tasks: [noop, child, flow] });
  // The child cannot run (its task is paused): the workflow waits for it.
  await skiplock.pauseTask('overlap-child');
  await skiplock.putSchedule('waits', { cron: '* * * * *', task: 'overlap-flow', overlap: 'skip' });
  for (let i = 0; i < 3; i++) {
    clock.advance(60_000);
    await skiplock.tick({ untilIdle: true, reapIntervalMs: 0 });
  }
  expect((await scheduledJobs(db.sql, 'waits')).map((j) => j.status)).toEqual(['WAITING']);
  // The child done, the workflow ends; the next instant fires.
  await skiplock.resumeTask('overlap-child');
  await skiplock.tick({ untilIdle: true, reapIntervalMs: 0 });
  expect((await scheduledJobs(db.sql, 'waits')).map((j) => j.status)).toEqual(['DONE']);
  clock.advance(60_000);
  await skiplock.tick({ untilIdle: true, reapIntervalMs: 0 });
  expect((await scheduledJobs(db.sql, 'waits')).map((j) => j.status)).toEqual(['DONE', 'DONE']);
});
