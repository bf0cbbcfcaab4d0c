/**
 * The wake state and the due-work hook, on a real database with the platform clock injected (so
 * an idle hour passes at once): an invocation with nothing due makes no statement; every write
 * that makes due work reaches the hook with its instant; a safety check per idleCheckMs.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'vitest';
import { createSkiplock } from '../../src/runtime/skiplock.ts';
import type { Sql, Statement } from '../../src/store/sql.ts';
import { createMemoryWakeStore, mergeWrite, shouldTick, WAKE_EARLY_MS } from '../../src/runtime/wake/state.ts';
import { exampleTasks } from '../../src/tasks/examples.ts';
import { defineTask } from '../../src/runtime/tasks/task.ts';
import * as z from 'zod';
import { createTestDb, type TestDb } from '../support/db.ts';
import { createTestApp, type TestApp } from '../http/helpers.ts';

const HOUR = 3_600_000;

describe('shouldTick', () => {
  test('unknown, due, safety check, not due', () => {
    expect(shouldTick(null, 1_000, HOUR)).toMatchObject({ tick: true, reason: 'unknown' });
    expect(shouldTick({ dueAt: 5_000, checkedAt: null, version: 0 }, 1_000, HOUR)).toMatchObject({ tick: true, reason: 'unknown' });
    expect(shouldTick({ dueAt: 1_000 + WAKE_EARLY_MS, checkedAt: 0, version: 0 }, 1_000, HOUR)).toMatchObject({ tick: true, reason: 'due' });
    expect(shouldTick({ dueAt: null, checkedAt: 0, version: 0 }, HOUR, HOUR)).toMatchObject({ tick: true, reason: 'idle-check' });
    expect(shouldTick({ dueAt: 9_000, checkedAt: 0, version: 0 }, 1_000, HOUR)).toEqual({ tick: false, reason: 'not-due', nextAtMs: 9_000 });
    expect(shouldTick({ dueAt: null, checkedAt: 0, version: 0 }, 1_000, HOUR)).toEqual({ tick: false, reason: 'not-due', nextAtMs: HOUR });
    expect(shouldTick({ dueAt: null, checkedAt: 0, version: 0 }, 10 * HOUR, 0)).toEqual({ tick: false, reason: 'not-due', nextAtMs: null });
  });

  test("a tick's write never raises an instant lowered while it ran", () => {
    const stored = { dueAt: 2_000, checkedAt: 0, version: 4 };
    expect(mergeWrite(stored, { dueAt: 50_000, checkedAt: 1_000 }, 4)).toEqual({ dueAt: 50_000, checkedAt: 1_000, version: 5 });
    expect(mergeWrite(stored, { dueAt: 50_000, checkedAt: 1_000 }, 3)).toEqual({ dueAt: 2_000, checkedAt: 1_000, version: 5 });
  });

  test('a lower on an unknown state keeps it unknown, and a tick started from it keeps the instant', async () => {
    const store = createMemoryWakeStore();
    await store.lower(7_000);
    expect(store.peek()).toEqual({ dueAt: 7_000, checkedAt: null, version: 0 });
    await store.write({ dueAt: null, checkedAt: 1_000 }, -1);
    expect(store.peek()!.dueAt).toBe(7_000);
  });
});

let db: TestDb;
beforeAll(async () => {
  db = await createTestDb();
});
afterAll(() => db.drop());
beforeEach(() => db.emptyJobs());

/**
 * A skiplock whose platform clock is `clock.t` (or the real one, `live`), counting statements and
 * the hook's calls; `beforeStatement` runs before each statement (a test's way to change the
 * database at an exact point of a tick).
 */
function harness(idleCheckMs = HOUR, options: { live?: boolean; beforeStatement?: (s: Statement) => Promise<void> } = {}) {
  const clock = { t: Date.now() };
  const calls: number[] = [];
  let statements = 0;
  const query = async (s: Statement) => {
    statements += 1;
    await options.beforeStatement?.(s);
    return db.sql.query(s);
  };
  const sql: Sql = { ...db.sql, query } as Sql;
  const store = createMemoryWakeStore();
  const skiplock = createSkiplock({
    sql,
    tasks: exampleTasks,
    log: () => {},
    idleCheckMs,
    wake: { store, now: options.live ? Date.now : () => clock.t, onDueWork: (at) => void calls.push(at) },
  });
  const tick = { budgetMs: 30_000, pollIntervalMs: 10, untilIdle: true };
  return { skiplock, clock, calls, store, statements: () => statements, reset: () => (statements = 0), tick };
}

/** The statement a tick ends with: "when is anything next due" (src/store/wakeup.ts). */
const isConclusion = (s: Statement) => s.text.includes('next_claimable_at');

test('an idle hour: one database check, then no statement until the safety check', async () => {
  const h = harness();
  const first = await h.skiplock.tickIfDue(h.tick);
  expect(first).toMatchObject({ ticked: true, reason: 'unknown' });
  const firstCost = h.statements();
  h.reset();
  // A cron each minute for an hour (compressed): none ticks, none makes a statement.
  for (let minute = 1; minute < 60; minute += 1) {
    h.clock.t += 60_000;
    expect(await h.skiplock.tickIfDue(h.tick)).toMatchObject({ ticked: false, reason: 'not-due' });
  }
  expect(h.statements()).toBe(0);
  h.clock.t += 60_000;
  expect(await h.skiplock.tickIfDue(h.tick)).toMatchObject({ ticked: true, reason: 'idle-check' });
  console.log(`idle hour, default idleCheckMs: ${h.statements()} statements (the first check: ${firstCost})`);
  expect(h.statements()).toBeLessThanOrEqual(6);
});

test('idleCheckMs 0: an idle deployment never looks at the database again', async () => {
  const h = harness(0);
  await h.skiplock.tickIfDue(h.tick);
  h.reset();
  h.clock.t += 100 * HOUR;
  expect(await h.skiplock.tickIfDue(h.tick)).toMatchObject({ ticked: false, nextAtMs: null });
  expect(h.statements()).toBe(0);
});

test('a delayed job: the hook hears its runAt; nothing is done before it, and it runs at it', async () => {
  const h = harness();
  await h.skiplock.tickIfDue(h.tick);
  const runAt = new Date(Date.now() + 800);
  const job = await h.skiplock.enqueue({ task: 'echo', payload: { message: 'later' }, runAt });
  expect(h.calls).toEqual([runAt.getTime()]);
  h.reset();
  expect(await h.skiplock.tickIfDue(h.tick)).toMatchObject({ ticked: false, nextAtMs: runAt.getTime() });
  expect(h.statements()).toBe(0);
  await new Promise((resolve) => setTimeout(resolve, runAt.getTime() - Date.now() + 20));
  h.clock.t = Date.now();
  const due = await h.skiplock.tickIfDue(h.tick);
  expect(due).toMatchObject({ ticked: true, reason: 'due' });
  expect(await h.skiplock.getJob(job.id)).toMatchObject({ status: 'DONE' });
});

describe('a wait inside the window (the Worker\'s cron mode: waitWithinMs)', () => {
  test('work that becomes due after the tick\'s last claim, before its conclusion, is ticked inside the window, not left for the next trigger', async () => {
    let job: { id: string } | undefined;
    let armed = true;
    // The tick finds nothing (the job is an hour away) and ends idle; just before its conclusion
    // the job's instant passes, so the conclusion says "due now". Nothing else will tick it: in
    // cron mode the next trigger is the next minute's cron.
    const h = harness(HOUR, {
      live: true,
      beforeStatement: async (s) => {
        if (!armed || !job || !isConclusion(s)) return;
        armed = false;
        await db.sql.query({ text: `UPDATE skiplock.job SET run_at = now() WHERE id = $1`, values: [job.id] });
      },
    });
    job = await h.skiplock.enqueue({ task: 'echo', payload: { message: 'due as the tick ends' }, delayMs: HOUR });
    const r = await h.skiplock.tickIfDue({ ...h.tick, force: true, waitWithinMs: 5_000 });
    expect(armed).toBe(false);
    expect(await h.skiplock.getJob(job.id)).toMatchObject({ status: 'DONE' });
    expect(r).toMatchObject({ ticked: true, result: { done: 1 } });
  });

  test('a job due later in the window is claimed by one tick at its instant, not by ticks that wake before it', async () => {
    const conclusions: number[] = [];
    const h = harness(HOUR, { live: true, beforeStatement: async (s) => void (isConclusion(s) && conclusions.push(Date.now())) });
    await h.skiplock.tickIfDue({ ...h.tick, force: true }); // the schedules' and the reaper's first pass
    const runAt = new Date(Date.now() + 1_500);
    const job = await h.skiplock.enqueue({ task: 'echo', payload: { message: 'at its instant' }, runAt });
    conclusions.length = 0;
    const r = await h.skiplock.tickIfDue({ ...h.tick, force: true, waitWithinMs: 5_000 });
    expect(await h.skiplock.getJob(job.id)).toMatchObject({ status: 'DONE' });
    expect(r.result).toMatchObject({ claimed: 1, done: 1 });
    // The forced tick, then the one at the instant: none in between that finds nothing.
    expect(conclusions).toHaveLength(2);
  });
});

test("a tick ends by writing the next due instant from the database: a retry's backoff", async () => {
  const h = harness();
  await h.skiplock.enqueue({ task: 'flaky', payload: { failTimes: 1 } });
  const before = h.clock.t;
  const r = await h.skiplock.tickIfDue(h.tick);
  expect(r.result.retried).toBe(1);
  const state = h.store.peek()!;
  expect(state.checkedAt).toBe(before);
  // flaky's backoff: 1 s ± 20 %, measured by the database and placed on the platform's clock.
  expect(state.dueAt! - before).toBeGreaterThanOrEqual(700);
  expect(state.dueAt! - before).toBeLessThanOrEqual(1_300);
  expect(r.nextAtMs).toBe(state.dueAt);
});

test('every write that makes due work reaches the hook, with its instant', async () => {
  const h = harness();
  const t0 = Date.now();
  await h.skiplock.enqueue({ task: 'echo', payload: { message: 'now' } });
  await h.skiplock.enqueue({ task: 'echo', payload: { message: 'in 5 s' }, delayMs: 5_000 });
  await h.skiplock.enqueueBatch([{ task: 'echo', payload: { message: 'b' }, delayMs: 9_000 }, { task: 'echo', payload: { message: 'b' }, delayMs: 3_000 }]);
  const replay = { task: 'echo', payload: { message: 'k' }, idempotencyKey: 'same' } as const;
  await h.skiplock.enqueue(replay);
  await h.skiplock.enqueue(replay); // a replay makes nothing new
  expect(h.calls).toHaveLength(4);
  expect(h.calls[0]! - t0).toBeLessThan(1_000);
  expect(h.calls[1]! - t0).toBeGreaterThanOrEqual(5_000);
  expect(h.calls[2]! - t0).toBeGreaterThanOrEqual(3_000); // the batch: its earliest job
  expect(h.calls[2]! - t0).toBeLessThan(4_000);
  h.calls.length = 0;
  const later = await h.skiplock.enqueue({ task: 'echo', payload: { message: 'x' }, delayMs: 60_000 });
  h.calls.length = 0;
  await h.skiplock.rescheduleJob(later.id, { delayMs: 0 }); // run now
  expect(h.calls).toHaveLength(1);
  await h.skiplock.putSchedule('every-minute', { cron: '* * * * *', task: 'echo', payload: { message: 's' } });
  expect(h.calls).toHaveLength(2);
  await h.skiplock.pauseTask('echo');
  await h.skiplock.resumeTask('echo');
  expect(h.calls).toHaveLength(3);
  for (const at of h.calls) expect(Math.abs(at - Date.now())).toBeLessThan(2_000);
  await h.skiplock.deleteSchedule('every-minute');
  // wake(at) from outside: the same hook; a bad instant is refused.
  h.calls.length = 0;
  const at = new Date(Date.now() + 42_000);
  await h.skiplock.wake(at);
  expect(h.calls).toEqual([at.getTime()]);
  await expect(h.skiplock.wake(new Date(Number.NaN))).rejects.toMatchObject({ code: 'invalid_request' });
});

// Issue 31, item 2: a cancel that wakes a WAITING parent makes due work, and no other write lowered the state.
test('a cancel whose child wakes its WAITING parent reaches the hook (single and bulk), due now', async () => {
  const calls: number[] = [];
  const child = defineTask({ name: 'paused-child', payload: z.object({}), handler: async () => 'never' });
  const parent = defineTask({
    name: 'waiting-parent',
    payload: z.object({}),
    handler: async (_p, ctx) => ctx.invoke('child', 'paused-child', {}).catch(() => 'child cancelled'),
  });
  const skiplock = createSkiplock({ sql: db.sql, tasks: [child, parent], log: () => {}, wake: { store: createMemoryWakeStore(), onDueWork: (at) => void calls.push(at) } });
  await skiplock.pauseTask('paused-child'); // its child never runs: only a cancel can end the wait
  for (const how of ['single', 'bulk'] as const) {
    const job = await skiplock.enqueue({ task: 'waiting-parent', payload: {} });
    await skiplock.tick({ budgetMs: 30_000, pollIntervalMs: 10, untilIdle: true });
    const waiting = await skiplock.getJob(job.id);
    expect(waiting?.status, JSON.stringify(waiting)).toBe('WAITING');
    const [childJob] = (await skiplock.listJobs({ task: 'paused-child', status: 'QUEUED' })).jobs;
    calls.length = 0;
    if (how === 'single') await skiplock.cancelJob(childJob!.id);
    else expect(await skiplock.bulk({ action: 'cancel', where: { task: 'paused-child', status: 'QUEUED' } })).toMatchObject({ changed: 1 });
    expect((await skiplock.getJob(job.id))?.status).toBe('QUEUED'); // due now, its child's end to read
    expect(calls).toHaveLength(1);
    expect(Math.abs(calls[0]! - Date.now())).toBeLessThan(2_000);
  }
});

/**
 * Every operation of a skiplock, sorted by what it does to due work (issue 31, item 2): a new
 * operation fails this test until it is put in one group, so none can forget the wake state.
 * MAKES_DUE_WORK: a write that can create or move due work, and so must reach the hook (each is
 * exercised below or in "every write that makes due work reaches the hook"; `reap` and
 * `fireDueSchedules`, a phase of a tick run alone, queue jobs due now); TICKS: runs a tick, which
 * ends by concluding into the wake state (each is exercised in "every tick concludes into the wake
 * state"), and enqueueAndWait({ tick }) does too; NONE: reads, or writes that make
 * nothing due (a pause, a deleted schedule, pruning), or hands the write to the caller
 * (`enqueueStatement`: the caller wakes).
 */
const MAKES_DUE_WORK = [
  'bulk', 'cancelJob', 'completeCallback', 'enqueue', 'enqueueAndWait', 'enqueueBatch', 'enqueueWithResult', 'fireDueSchedules', 'putSchedule', 'reap',
  'rescheduleJob', 'restartJob', 'resumeTask', 'retryDead', 'retryJob', 'sendEvent', 'wake',
];
const TICKS = ['tick', 'tickIfDue'];
const NONE = [
  'activity', 'checkReplay', 'currentTime', 'deadByTask', 'deleteSchedule', 'enqueueStatement', 'ensureSchema', 'fairnessStatus', 'flowStatus', 'flowWait', 'getJob',
  'getJobDetail', 'getSchedule', 'isCallbackToken', 'listEvents', 'listJobs', 'listSchedules', 'listTasks', 'migrate', 'msUntilNextWork', 'pauseTask',
  'ping', 'prune', 'readStream', 'schedules', 'schemaStatus', 'setWakeDriver', 'sql', 'stats', 'streamToken', 'streamTotals', 'tasks', 'tickTotals',
  'verifyStreamToken', 'waitForJob',
];

test('every operation of a skiplock is sorted by what it does to due work', () => {
  const { skiplock } = harness();
  const sorted = [...MAKES_DUE_WORK, ...TICKS, ...NONE];
  expect(new Set(sorted).size).toBe(sorted.length);
  expect(Object.keys(skiplock).sort()).toEqual(sorted.sort());
});

test('retryJob, retryDead, restartJob and a sendEvent that wakes a wait reach the hook, due now', async () => {
  const calls: number[] = [];
  const waiter = defineTask({ name: 'event-waiter', payload: z.object({}), handler: async (_p, ctx) => ctx.waitForEvent('paid', { event: 'order.paid' }) });
  const failing = defineTask({ name: 'always-dead', payload: z.object({}), maxAttempts: 1, handler: async () => { throw new Error('no'); } });
  const skiplock = createSkiplock({ sql: db.sql, tasks: [waiter, failing], log: () => {}, wake: { store: createMemoryWakeStore(), onDueWork: (at) => void calls.push(at) } });
  const tick = () => skiplock.tick({ budgetMs: 30_000, pollIntervalMs: 10, untilIdle: true });
  const dueNow = async (write: () => Promise<unknown>) => {
    calls.length = 0;
    await write();
    expect(calls).toHaveLength(1);
    expect(Math.abs(calls[0]! - Date.now())).toBeLessThan(2_000);
  };
  const dead = async () => {
    const job = await skiplock.enqueue({ task: 'always-dead', payload: {} });
    await tick();
    expect((await skiplock.getJob(job.id))?.status).toBe('DEAD');
    return job.id;
  };
  const first = await dead();
  await dueNow(() => skiplock.retryJob(first));
  await tick();
  await dead();
  await dueNow(async () => expect(await skiplock.retryDead({ task: 'always-dead' })).toBeGreaterThan(0));
  await tick();
  const third = await dead();
  await dueNow(() => skiplock.restartJob(third));
  const waiting = await skiplock.enqueue({ task: 'event-waiter', payload: {} });
  await tick();
  expect((await skiplock.getJob(waiting.id))?.status).toBe('WAITING');
  await dueNow(async () => expect(await skiplock.sendEvent({ name: 'order.paid', data: { ok: true } })).toMatchObject({ woken: 1 }));
});

describe('POST /v1/wake', () => {
  let t: TestApp;
  const heard: number[] = [];
  beforeAll(async () => {
    t = await createTestApp({ skiplock: { wake: { onDueWork: (at) => void heard.push(at) } } });
  });
  afterAll(() => t.close());

  test('authenticated; body optional (default now); { at } lowers to that instant; a bad at is 400 and wakes nothing', async () => {
    expect((await t.call('POST', '/v1/wake', { token: null })).status).toBe(401);
    const before = Date.now();
    const none = await t.call('POST', '/v1/wake');
    expect(none.status).toBe(202);
    expect(heard.at(-1)).toBeGreaterThanOrEqual(before);
    const at = '2030-01-01T00:00:00.000Z';
    const given = await t.call('POST', '/v1/wake', { body: { at } });
    expect(given.status).toBe(202);
    expect(await given.json()).toEqual({ at });
    expect(heard.at(-1)).toBe(Date.parse(at));
    const count = heard.length;
    for (const body of [{ at: 'tomorrow' }, { at: 5 }, { when: 'now' }, '{not json'])
      expect((await t.call('POST', '/v1/wake', { body })).status, JSON.stringify(body)).toBe(400);
    expect(heard).toHaveLength(count);
  });
});

/**
 * Issue 31, item 2: every tick concludes into the wake state, not only those the wake state
 * decided (tickIfDue): a tick() (GET /v1/tick, a script) or enqueueAndWait({ tick }) that leaves
 * work due later — here a retry's backoff — writes that instant into the driver's store and tells
 * the driver, so that the platform wakes for it instead of at its next safety check. The job is
 * written behind this skiplock's back (another instance), so only the tick can tell the state.
 */
type Scenario = (h: ReturnType<typeof harness>) => Promise<{ nextAtMs?: number | null } | unknown>;
const TICK_SCENARIOS: Record<string, Scenario> = {
  tick: (h) => h.skiplock.tick(h.tick),
  // Its caller (the Node loop, an alarm, a cron) plans the next wake-up from its answer, nextAtMs.
  tickIfDue: (h) => h.skiplock.tickIfDue({ ...h.tick, force: true }),
};

describe('every tick concludes into the wake state', () => {
  test('every TICKS operation has a scenario below', () => {
    expect(Object.keys(TICK_SCENARIOS).sort()).toEqual([...TICKS].sort());
  });

  const scenarios = [
    ...Object.entries(TICK_SCENARIOS),
    // enqueueAndWait's own job is an idempotency-key replay (it writes nothing, reaches no hook): only its tick can tell.
    [
      'enqueueAndWait({ tick })',
      async (h: ReturnType<typeof harness>) => {
        const { tick } = await h.skiplock.enqueueAndWait({ task: 'echo', payload: { message: 'kept' }, idempotencyKey: 'replayed' }, { timeoutMs: 0, tick: h.tick });
        return tick;
      },
    ] as const,
  ];
  for (const [name, run] of scenarios) {
    test(`${name}: a retry it leaves lowers the store to the retry's instant, and the driver hears it`, async () => {
      const h = harness();
      await h.skiplock.enqueue({ task: 'echo', payload: { message: 'kept' }, idempotencyKey: 'replayed' });
      await h.skiplock.tickIfDue(h.tick); // checked: nothing due but the kept job's retention pass, days away
      expect(h.store.peek()!.checkedAt).toBe(h.clock.t);
      expect(h.store.peek()!.dueAt! - h.clock.t).toBeGreaterThan(HOUR);
      const other = createSkiplock({ sql: db.sql, tasks: exampleTasks, log: () => {} });
      await other.enqueue({ task: 'flaky', payload: { failTimes: 1 } });
      h.calls.length = 0;
      h.reset();
      const before = h.clock.t;
      const answer = await run(h);
      const state = h.store.peek()!;
      // flaky's backoff: 1 s ± 20 %, measured by the database and placed on the platform's clock.
      expect(state.dueAt! - before).toBeGreaterThanOrEqual(700);
      expect(state.dueAt! - before).toBeLessThanOrEqual(1_300);
      expect(state.checkedAt).toBe(h.clock.t);
      if (name === 'tickIfDue') expect(answer).toMatchObject({ nextAtMs: state.dueAt });
      else expect(h.calls).toEqual([state.dueAt]);
      // One statement for the conclusion, beyond the tick's own.
      expect(h.statements()).toBeLessThanOrEqual(6);
    });
  }

  test('a tick that did nothing concludes nothing: no statement beyond its own', async () => {
    const conclusions: Statement[] = [];
    const counting = harness(HOUR, { beforeStatement: async (s) => void (isConclusion(s) && conclusions.push(s)) });
    await counting.skiplock.tick(counting.tick); // the first: schedules and registration
    conclusions.length = 0;
    await counting.skiplock.tick(counting.tick);
    expect(conclusions).toHaveLength(0);
  });

  test('reap and fireDueSchedules, run alone, reach the hook due now when they queue jobs', async () => {
    const h = harness();
    const job = await h.skiplock.enqueue({ task: 'echo', payload: { message: 'lease lost' } });
    await db.sql.query({ text: `UPDATE skiplock.job SET status = 'RUNNING', attempts = 1, locked_by = 'gone', locked_until = now() - interval '1 second' WHERE id = $1`, values: [job.id] });
    h.calls.length = 0;
    expect(await h.skiplock.reap()).toBe(1);
    expect(h.calls).toHaveLength(1);
    expect(Math.abs(h.calls[0]! - Date.now())).toBeLessThan(2_000);
    h.calls.length = 0;
    expect(await h.skiplock.reap()).toBe(0);
    expect(h.calls).toHaveLength(0);
    await h.skiplock.putSchedule('due-now', { every: 1_000, task: 'echo', payload: { message: 'fired' } });
    await new Promise((resolve) => setTimeout(resolve, 1_200));
    h.calls.length = 0;
    expect(await h.skiplock.fireDueSchedules()).toBeGreaterThan(0);
    expect(h.calls).toHaveLength(1);
    h.calls.length = 0;
    expect(await h.skiplock.fireDueSchedules()).toBe(0);
    expect(h.calls).toHaveLength(0);
    await h.skiplock.deleteSchedule('due-now');
  });
});
