import { afterAll, beforeAll, expect, test } from 'vitest';
import { z } from 'zod';
import { defineSchedule } from '../../src/runtime/schedules/definition.ts';
import { defineTask } from '../../src/runtime/tasks/task.ts';
import { createTestDb, type TestDb } from '../support/db.ts';
import { createClock, firings, iso, MINUTE, scheduledJobs, scheduleRow, skiplockAt } from './support.ts';

let db: TestDb;
beforeAll(async () => (db = await createTestDb()));
afterAll(() => db.drop());

test('a static schedule fires each instant once, each firing with its job', async () => {
  const clock = createClock('2026-01-05T10:00:30Z');
  const skiplock = skiplockAt(db.sql, clock, { schedules: [defineSchedule({ name: 'every-minute', cron: '* * * * *', task: 'noop' })] });
  expect(await skiplock.fireDueSchedules()).toBe(0); // the first tick stores it, from now
  for (let i = 0; i < 3; i++) {
    clock.advance(MINUTE);
    expect(await skiplock.fireDueSchedules()).toBe(1);
    expect(await skiplock.fireDueSchedules()).toBe(0); // the same instant again: nothing
  }
  const fired = await firings(db.sql, 'every-minute');
  expect(iso(fired)).toEqual(['2026-01-05T10:01:00.000Z', '2026-01-05T10:02:00.000Z', '2026-01-05T10:03:00.000Z']);
  const jobs = await scheduledJobs(db.sql, 'every-minute');
  expect(jobs.map((j) => j.id)).toEqual(fired.map((f) => f.job_id));
  expect(await scheduleRow(db.sql, 'every-minute')).toMatchObject({ next_run_at: new Date('2026-01-05T10:04:00Z') });
});

test('firing costs one round trip when nothing is due and two when something is', async () => {
  const clock = createClock('2026-01-05T10:00:30Z');
  const statements: string[] = [];
  const counted = {
    ...db.sql,
    query: (s: Parameters<typeof db.sql.query>[0]) => {
      statements.push(s.text.trim().split(/\s+/).slice(0, 2).join(' '));
      return db.sql.query(s);
    },
  } as typeof db.sql;
  const skiplock = skiplockAt(counted, clock, { schedules: [defineSchedule({ name: 'hourly', cron: '0 * * * *', task: 'noop' })] });
  await skiplock.fireDueSchedules(); // stores it; computes its next run (10:00:30 → 11:00)
  statements.length = 0;
  clock.set('2026-01-05T10:59:59Z');
  expect(await skiplock.fireDueSchedules()).toBe(0);
  expect(statements).toHaveLength(1);
  clock.set('2026-01-05T11:00:01Z');
  expect(await skiplock.fireDueSchedules()).toBe(1);
  expect(statements).toHaveLength(3);
});

test('a tick fires first, then runs what it fired; listSchedules shows next run, last firing and its status', async () => {
  const clock = createClock('2026-01-05T10:00:30Z');
  const skiplock = skiplockAt(db.sql, clock, { schedules: [defineSchedule({ name: 'ticked', cron: '*/2 * * * *', task: 'noop', payload: { n: 2 } })] });
  await skiplock.tick({ untilIdle: true, reapIntervalMs: 0 });
  clock.set('2026-01-05T10:02:01Z');
  expect(await skiplock.tick({ untilIdle: true, reapIntervalMs: 0 })).toMatchObject({ fired: 1 });
  const info = (await skiplock.listSchedules()).schedules.find((s) => s.name === 'ticked');
  expect(info).toMatchObject({
    source: 'static',
    cron: '*/2 * * * *',
    payload: { n: 2 },
    nextRunAt: new Date('2026-01-05T10:04:00Z'),
    lastScheduledFor: new Date('2026-01-05T10:02:00Z'),
    lastFiredAt: new Date('2026-01-05T10:02:01Z'),
    lastStatus: 'DONE',
  });
  expect(info!.lastJobId).toBe((await scheduledJobs(db.sql, 'ticked'))[0]!.id);
});

test('a long tick keeps firing: a per-second schedule fires as its instants come, not all at the start', async () => {
  const t0 = performance.now();
  const start = Date.parse('2026-01-05T10:00:00.500Z');
  // The clock passed into SQL moves with real time here: the point is the tick's own pacing.
  const clock = { now: () => new Date(start + (performance.now() - t0)) };
  const everySecond = defineSchedule({ name: 'every-second', cron: '* * * * * *', task: 'noop', catchUp: 'latest' });
  const quickNoop = defineTask({ name: 'noop', payload: z.object({}), timeoutMs: 200, handler: () => null });
  const skiplock = skiplockAt(db.sql, clock, { schedules: [everySecond], tasks: [quickNoop] });
  const result = await skiplock.tick({ budgetMs: 3_500, marginMs: 500, fireIntervalMs: 100, pollIntervalMs: 100 });
  // Stored at the start (nothing due yet), then fired at about 10:00:01, :02 and :03.
  expect(result.fired).toBeGreaterThanOrEqual(2);
  expect(result.done).toBe(result.fired);
  const fired = await firings(db.sql, 'every-second');
  expect(new Set(iso(fired)).size).toBe(fired.length);
});
