/**
 * Recurring state: each run of a schedule's job reads the state (ctx.state) and may replace it
 * (ctx.setState); the new state is written with the DONE result, in the same statement, fenced.
 */
import { afterAll, beforeAll, expect, test } from 'vitest';
import { z } from 'zod';
import { defineSchedule } from '../../src/runtime/schedules/definition.ts';
import { defineTask } from '../../src/runtime/tasks/task.ts';
import { completeAndClaim, type ResultRow } from '../../src/store/claim.ts';
import { reapExpiredLeases } from '../../src/store/leases.ts';
import { statement } from '../../src/store/sql.ts';
import { mapClaimedJob } from '../../src/store/rows.ts';
import { createTestDb, type TestDb } from '../support/db.ts';
import { createClock, MINUTE, scheduledJobs, scheduleRow, skiplockAt } from './support.ts';

let db: TestDb;
beforeAll(async () => (db = await createTestDb()));
afterAll(() => db.drop());

const seen: unknown[] = [];
const counter = defineTask({
  name: 'counter',
  payload: z.object({}),
  handler: (_payload, ctx) => {
    seen.push(ctx.state);
    const n = (ctx.state as { n: number } | null)?.n ?? 0;
    ctx.setState({ n: n + 1 });
    return { saw: n };
  },
});
const failing = defineTask({
  name: 'failing',
  payload: z.object({}),
  maxAttempts: 1,
  handler: (_payload, ctx) => {
    ctx.setState({ lost: true });
    throw new Error('boom');
  },
});
const stateless = defineTask({ name: 'stateless', payload: z.object({}), maxAttempts: 1, handler: (_p, ctx) => ctx.setState(1) });

test('the state is carried from run to run', async () => {
  const clock = createClock('2026-01-05T10:00:30Z');
  const skiplock = skiplockAt(db.sql, clock, {
    tasks: [counter],
    schedules: [defineSchedule({ name: 'count', cron: '* * * * *', task: counter, overlap: 'skip' })],
  });
  await skiplock.fireDueSchedules();
  for (let i = 0; i < 5; i++) {
    clock.advance(MINUTE);
    expect(await skiplock.tick({ untilIdle: true, reapIntervalMs: 0 })).toMatchObject({ fired: 1, done: 1 });
  }
  expect(seen).toEqual([null, { n: 1 }, { n: 2 }, { n: 3 }, { n: 4 }]);
  expect((await scheduledJobs(db.sql, 'count')).map((j) => j.schedule_state)).toEqual([null, { n: 1 }, { n: 2 }, { n: 3 }, { n: 4 }]);
  expect((await skiplock.listSchedules()).schedules[0]).toMatchObject({ name: 'count', state: { n: 5 }, lastStatus: 'DONE' });
});

test('a failed run does not write its state; a job not fired by a schedule cannot set one', async () => {
  const clock = createClock('2026-01-05T10:00:30Z');
  const skiplock = skiplockAt(db.sql, clock, {
    tasks: [failing, stateless],
    schedules: [defineSchedule({ name: 'fails', cron: '* * * * *', task: 'failing' })],
  });
  await skiplock.fireDueSchedules();
  clock.advance(MINUTE);
  expect(await skiplock.tick({ untilIdle: true, reapIntervalMs: 0 })).toMatchObject({ fired: 1, dead: 1 });
  expect((await scheduleRow(db.sql, 'fails'))!.state).toBeNull();

  const job = await skiplock.enqueue({ task: 'stateless', payload: {} });
  await skiplock.tick({ untilIdle: true, reapIntervalMs: 0 });
  expect(await skiplock.getJob(job.id)).toMatchObject({ status: 'DEAD', lastError: 'TypeError: setState: this job was not fired by a schedule' });
});

test('a stale worker cannot write the state; a run that read an outdated state cannot overwrite a newer one', async () => {
  const clock = createClock('2026-01-05T10:00:30Z');
  const skiplock = skiplockAt(db.sql, clock, { tasks: [counter] });
  await skiplock.putSchedule('fenced', { cron: '* * * * *', task: 'counter', catchUp: 'all' });
  await db.sql.query(statement(`UPDATE skiplock.schedule SET state = '{"n": 5}' WHERE name = 'fenced'`));
  clock.set('2026-01-05T10:02:30Z');
  expect(await skiplock.fireDueSchedules()).toBe(2); // 10:01 and 10:02, both read {n: 5}

  const claim = (workerId: string, results: ResultRow[], limit = 1) =>
    db.sql.query(completeAndClaim({ now: clock.now(), workerId, results, limit, budgetMs: 60_000, leaseMs: 30_000, leaseGraceMs: 0, tasks: ['counter'] }));
  const result = (id: string, attempt: number, n: number): ResultRow => ({
    id, attempt, status: 'DONE', result: null, error: null, delay_ms: 0, release: false, state: { value: { n } },
  });

  // Worker A claims the 10:01 job, stalls past its lease; the reaper returns it; B claims it.
  const [first] = await claim('A', []);
  expect(mapClaimedJob(first!, 'A')).toMatchObject({ scheduledFor: new Date('2026-01-05T10:01:00Z'), scheduleState: { n: 5 } });
  clock.advance(11 * MINUTE);
  await db.sql.query(reapExpiredLeases({ now: clock.now(), limit: 10 }));
  const claimedByB = await claim('B', [], 2);
  expect(claimedByB.map((row) => String(row.id)).sort()).toContain(String(first!.id));
  const second = claimedByB.find((row) => String(row.id) !== String(first!.id))!;
  expect(mapClaimedJob(second, 'B')).toMatchObject({ scheduledFor: new Date('2026-01-05T10:02:00Z'), scheduleState: { n: 5 } });

  // A's late write is stale: neither its result nor its state lands.
  const [staleWrite] = await claim('A', [result(String(first!.id), 1, 100)], 0);
  expect(staleWrite!.written).toEqual([]);
  expect((await scheduleRow(db.sql, 'fenced'))!.state).toEqual({ n: 5 });

  // B's write lands, and its state with it.
  const [written] = await claim('B', [result(String(first!.id), 2, 6)], 0);
  expect(written!.written).toEqual([String(first!.id)]);
  expect((await scheduleRow(db.sql, 'fenced'))!.state).toEqual({ n: 6 });

  // The 10:02 job read {n: 5}, which is no longer the state: its result lands, its state does not.
  const [late] = await claim('B', [result(String(second.id), 1, 6000)], 0);
  expect(late!.written).toEqual([String(second.id)]);
  expect((await scheduleRow(db.sql, 'fenced'))!.state).toEqual({ n: 6 });
  expect(await skiplock.getJob(String(second.id))).toMatchObject({ status: 'DONE' });
});
