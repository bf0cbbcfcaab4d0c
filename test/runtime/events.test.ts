/**
 * Events (src/runtime/events/events.ts, src/runtime/steps/event-waits.ts, src/store/events.ts): sendEvent
 * wakes the waits it finds in the statement that stores it; a wait finds an event stored before it
 * was reached; timeouts resolve null; `on:` starts one job per event; cancelOn cancels.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'vitest';
import { z } from 'zod';
import { createSkiplock, defineTask, type Task } from '../../src/index.ts';
import { statement } from '../../src/store/sql.ts';
import { createTestDb, type TestDb } from '../support/db.ts';

let db: TestDb;
beforeAll(async () => {
  db = await createTestDb();
});
afterAll(() => db.drop());
beforeEach(async () => {
  await db.emptyJobs('skiplock.event');
});

const quiet = () => {};
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const rows = (text: string, values: unknown[] = []) => db.sql.query(statement(text, values));

const waiter = (resumed: unknown[][] = []) =>
  defineTask({
    name: 'waiter',
    payload: z.object({ key: z.string().optional(), timeoutMs: z.number().optional(), times: z.number().default(1) }),
    maxAttempts: 3,
    timeoutMs: 2_000,
    handler: async (p, ctx) => {
      const got: unknown[] = [];
      for (let i = 0; i < p.times; i++) {
        await ctx.step(`before-${i}`, () => i);
        got.push(await ctx.waitForEvent(`wait-${i}`, { event: 'order.paid', ...(p.key && { key: p.key }), ...(p.timeoutMs !== undefined && { timeoutMs: p.timeoutMs }) }));
      }
      resumed.push(got);
      return { got };
    },
  });

function make(tasks: Task[]) {
  return createSkiplock({ sql: db.sql, tasks, log: quiet, retention: false });
}
const tickIdle = (s: ReturnType<typeof make>) => s.tick({ untilIdle: true, budgetMs: 5_000, pollIntervalMs: 10 });

describe('waitForEvent', () => {
  test('a job waits (WAITING, no lease), the send wakes it in its statement, the wait returns {data, eventId}', async () => {
    const s = make([waiter()]);
    const job = await s.enqueue({ task: 'waiter', payload: { key: 'o-42' } });
    await tickIdle(s);
    const waiting = (await s.getJob(job.id))!;
    expect(waiting.status).toBe('WAITING');
    expect(waiting.lockedBy).toBeNull();
    // Another key, and another name: nothing woken.
    expect((await s.sendEvent({ name: 'order.paid', key: 'o-1', data: {} })).woken).toBe(0);
    expect((await s.sendEvent({ name: 'order.shipped', key: 'o-42' })).woken).toBe(0);
    const sent = await s.sendEvent({ name: 'order.paid', key: 'o-42', data: { amount: 12 } });
    expect(sent).toMatchObject({ woken: 1, started: 0, created: true });
    expect((await s.getJob(job.id))!.status).toBe('QUEUED');
    await tickIdle(s);
    const done = (await s.getJob(job.id))!;
    expect(done.status).toBe('DONE');
    expect(done.result).toEqual({ got: [{ data: { amount: 12 }, eventId: sent.id }] });
  });

  test('an event sent before the handler reaches its wait is not lost; one sent before the job was created is not taken', async () => {
    const s = make([waiter()]);
    await s.sendEvent({ name: 'order.paid', key: 'early', data: { n: 0 } });
    await sleep(5);
    const job = await s.enqueue({ task: 'waiter', payload: { key: 'early' } });
    const sent = await s.sendEvent({ name: 'order.paid', key: 'early', data: { n: 1 } });
    expect(sent.woken).toBe(0);
    await tickIdle(s);
    expect((await s.getJob(job.id))!.result).toEqual({ got: [{ data: { n: 1 }, eventId: sent.id }] });
  });

  test('successive waits of one job take successive events, each once; a wait without a key takes any key', async () => {
    const s = make([waiter()]);
    const job = await s.enqueue({ task: 'waiter', payload: { times: 3 } });
    const a = await s.sendEvent({ name: 'order.paid', key: 'x', data: 'a' });
    const b = await s.sendEvent({ name: 'order.paid', data: 'b' });
    await tickIdle(s);
    expect((await s.getJob(job.id))!.status).toBe('WAITING');
    const c = await s.sendEvent({ name: 'order.paid', key: 'y', data: 'c' });
    expect(c.woken).toBe(1);
    await tickIdle(s);
    expect((await s.getJob(job.id))!.result).toEqual({ got: [{ data: 'a', eventId: a.id }, { data: 'b', eventId: b.id }, { data: 'c', eventId: c.id }] });
  });

  test('one event, 100 waiters: all woken by the one send', async () => {
    const s = make([waiter()]);
    const jobs = await s.enqueueBatch(Array.from({ length: 100 }, () => ({ task: 'waiter' as const, payload: { key: 'many' } })));
    await s.tick({ untilIdle: true, budgetMs: 10_000, concurrency: 20, pollIntervalMs: 10 });
    expect(Number((await rows(`SELECT count(*) AS n FROM skiplock.job WHERE status = 'WAITING'`))[0]!.n)).toBe(100);
    const sent = await s.sendEvent({ name: 'order.paid', key: 'many', data: 1 });
    expect(sent.woken).toBe(100);
    await s.tick({ untilIdle: true, budgetMs: 10_000, concurrency: 20, pollIntervalMs: 10 });
    const done = await rows(`SELECT count(*) AS n FROM skiplock.job WHERE status = 'DONE' AND id = ANY($1::bigint[])`, [jobs.map((j) => j.job.id)]);
    expect(Number(done[0]!.n)).toBe(100);
  });

  test('a timeout with no event: null, on time; the job was WAITING until it (like a sleep)', async () => {
    const s = make([waiter()]);
    const job = await s.enqueue({ task: 'waiter', payload: { key: 'never', timeoutMs: 400 } });
    await s.tick({ budgetMs: 3_500, pollIntervalMs: 20, untilIdle: true });
    const waiting = (await s.getJob(job.id))!;
    expect(waiting.status).toBe('WAITING');
    const [step] = await rows(`SELECT status, wake_at FROM skiplock.job_step WHERE job_id = $1 AND id = 'wait-0'`, [job.id]);
    expect(step!.status).toBe('waiting');
    expect(waiting.runAt.getTime()).toBe(new Date(step!.wake_at as string).getTime());
    await sleep(450);
    await tickIdle(s);
    const done = (await s.getJob(job.id))!;
    expect(done.result).toEqual({ got: [null] });
    const [after] = await rows(`SELECT status, output, finished_at, wake_at FROM skiplock.job_step WHERE job_id = $1 AND id = 'wait-0'`, [job.id]);
    expect(after).toMatchObject({ status: 'done', output: null });
    // An event after the timeout finds no waiter.
    expect((await s.sendEvent({ name: 'order.paid', key: 'never' })).woken).toBe(0);
  });

  test('an event before the timeout wakes a timed wait (WAITING until then) at once', async () => {
    const s = make([waiter()]);
    const job = await s.enqueue({ task: 'waiter', payload: { key: 'soon', timeoutMs: 60_000 } });
    await tickIdle(s);
    expect((await s.getJob(job.id))!.runAt.getTime()).toBeGreaterThan(Date.now() + 50_000);
    const sent = await s.sendEvent({ name: 'order.paid', key: 'soon', data: 7 });
    expect(sent.woken).toBe(1);
    await tickIdle(s);
    expect((await s.getJob(job.id))!.result).toEqual({ got: [{ data: 7, eventId: sent.id }] });
  });

  test('the same idempotency key again answers the first send and writes nothing', async () => {
    const s = make([waiter()]);
    await s.enqueue({ task: 'waiter', payload: { key: 'k' } });
    await tickIdle(s);
    const first = await s.sendEvent({ name: 'order.paid', key: 'k', idempotencyKey: 'pay-1' });
    const again = await s.sendEvent({ name: 'order.paid', key: 'k', idempotencyKey: 'pay-1' });
    expect(first).toMatchObject({ woken: 1, created: true });
    expect(again).toMatchObject({ id: first.id, woken: 1, created: false });
    expect(Number((await rows(`SELECT count(*) AS n FROM skiplock.event`))[0]!.n)).toBe(1);
  });

  test('bad input is refused and writes nothing', async () => {
    const s = make([waiter()]);
    await expect(s.sendEvent({ name: 'has space' })).rejects.toMatchObject({ code: 'invalid_request' });
    await expect(s.sendEvent({ name: 'x', key: '' })).rejects.toMatchObject({ code: 'invalid_request' });
    await expect(s.sendEvent({ name: 'x', data: 'y'.repeat(300 * 1024) })).rejects.toMatchObject({ code: 'invalid_request' });
    await expect(s.sendEvent({ name: 'x', data: '\u0000' })).rejects.toMatchObject({ code: 'invalid_request' });
    await expect(s.sendEvent({ name: 'x', extra: 1 } as never)).rejects.toMatchObject({ code: 'invalid_request' });
    expect(Number((await rows(`SELECT count(*) AS n FROM skiplock.event`))[0]!.n)).toBe(0);
  });
});

describe('on: and cancelOn', () => {
  test('3 tasks on one event, the send retried 5 times with its key: 3 jobs; a refused payload is reported and stored', async () => {
    const on = (name: string, schema: z.ZodType = z.object({ userId: z.string() })) =>
      defineTask({ name, payload: schema, on: 'user.created', timeoutMs: 2_000, handler: () => null });
    const s = make([on('welcome'), on('crm'), on('audit', z.unknown()), on('strict', z.object({ age: z.number() }))]);
    const answers = [];
    for (let i = 0; i < 6; i++) answers.push(await s.sendEvent({ name: 'user.created', data: { userId: 'u1' }, idempotencyKey: 'signup-u1' }));
    expect(answers[0]).toMatchObject({ started: 3, created: true });
    expect(answers[0]!.refused).toEqual([{ task: 'strict', message: expect.stringContaining('age') }]);
    for (const a of answers.slice(1)) expect(a).toMatchObject({ id: answers[0]!.id, started: 3, created: false });
    const jobs = await rows(`SELECT task, payload, idempotency_key FROM skiplock.job ORDER BY task`);
    expect(jobs.map((j) => j.task)).toEqual(['audit', 'crm', 'welcome']);
    expect(jobs[0]!.payload).toEqual({ userId: 'u1' });
    const [event] = await rows(`SELECT refused FROM skiplock.event`);
    expect(event!.refused).toEqual([{ task: 'strict', message: expect.stringContaining('age') }]);
  });

  test('cancelOn cancels a WAITING, a sleeping and a QUEUED job, and asks a RUNNING one to stop; other keys are left', async () => {
    const started: string[] = [];
    const sleeper = defineTask({
      name: 'sleeper',
      payload: z.object({ order: z.string() }),
      timeoutMs: 2_000,
      cancelOn: [{ event: 'order.cancelled', key: (p) => p.order }],
      handler: async (_p, ctx) => {
        await ctx.sleep('nap', 60_000);
      },
    });
    const runner = defineTask({
      name: 'runner',
      payload: z.object({ order: z.string() }),
      timeoutMs: 2_000,
      cancelOn: [{ event: 'order.cancelled', key: (p) => p.order }],
      handler: async (_p, ctx) => {
        started.push(ctx.job.id);
        while (!ctx.signal.aborted) {
          await ctx.heartbeat();
          await sleep(20);
        }
        throw ctx.signal.reason;
      },
    });
    const s = make([waiter(), sleeper, runner]);
    const waiting = await s.enqueue({ task: 'waiter', payload: { key: 'zzz' }, cancelOn: [{ event: 'order.cancelled', key: 'o-9' }] });
    const asleep = await s.enqueue({ task: 'sleeper', payload: { order: 'o-9' } });
    await tickIdle(s);
    const queued = await s.enqueue({ task: 'sleeper', payload: { order: 'o-9' }, delayMs: 60_000 });
    const other = await s.enqueue({ task: 'sleeper', payload: { order: 'o-10' }, delayMs: 60_000 });
    const running = await s.enqueue({ task: 'runner', payload: { order: 'o-9' } });
    const ticking = s.tick({ budgetMs: 4_000, pollIntervalMs: 20 });
    while (started.length === 0) await sleep(10);
    const sent = await s.sendEvent({ name: 'order.cancelled', key: 'o-9' });
    expect(sent.cancelled).toBe(4);
    await ticking;
    const status = async (id: string) => (await s.getJob(id))!.status;
    expect(await status(waiting.id)).toBe('CANCELLED');
    expect(await status(asleep.id)).toBe('CANCELLED');
    expect(await status(queued.id)).toBe('CANCELLED');
    expect(await status(running.id)).toBe('CANCELLED');
    expect(await status(other.id)).toBe('QUEUED');
  });
});

describe('the race of a send and a wait registration', () => {
  test('a wait registered while a send is uncommitted waits for it (the lock) and takes its event; a send while a registration is uncommitted wakes it', async () => {
    const { default: pg } = await import('pg');
    const { eventLock, sendEvent } = await import('../../src/store/events.ts');
    const s = make([waiter()]);
    // 1. The send holds its lock, its event stored but not committed, while the job reaches its wait.
    const job = await s.enqueue({ task: 'waiter', payload: { key: 'race-1' } });
    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    try {
      await client.query('BEGIN');
      for (const st of [eventLock({ name: 'order.paid', key: 'race-1', for: 'send' }), sendEvent({ now: null, name: 'order.paid', key: 'race-1', data: '"held"', idempotencyKey: null, triggered: [], refused: null })])
        await client.query(st.text, st.values as unknown[]);
      const ticking = tickIdle(s);
      await sleep(300);
      // The registration is blocked on the lock: the job is still RUNNING.
      expect((await s.getJob(job.id))!.status).toBe('RUNNING');
      await client.query('COMMIT');
      await ticking;
    } finally {
      await client.end();
    }
    expect((await s.getJob(job.id))!.result).toMatchObject({ got: [{ data: 'held' }] });

    // 2. The registration holds the lock (as its batch does), uncommitted, while the send runs.
    const second = await s.enqueue({ task: 'waiter', payload: { key: 'race-2' } });
    await tickIdle(s);
    expect((await s.getJob(second.id))!.status).toBe('WAITING');
    const holder = new pg.Client({ connectionString: db.url });
    await holder.connect();
    try {
      await holder.query('BEGIN');
      const lock = eventLock({ name: 'order.paid', key: 'race-2', for: 'wait' });
      await holder.query(lock.text, lock.values as unknown[]);
      const sending = s.sendEvent({ name: 'order.paid', key: 'race-2', data: 'late' });
      await sleep(300);
      await holder.query('COMMIT');
      expect((await sending).woken).toBe(1);
    } finally {
      await holder.end();
    }
    await tickIdle(s);
    expect((await s.getJob(second.id))!.result).toMatchObject({ got: [{ data: 'late' }] });
  });
});

describe('with ctx.patched', () => {
  test('a patch marker reached before a wait is recorded with the wait: the run after the event answers true again', async () => {
    const task = defineTask({
      name: 'patched-waiter',
      payload: z.object({}),
      timeoutMs: 2_000,
      handler: async (_p, ctx) => {
        const patched = ctx.patched('new-path');
        const got = await ctx.waitForEvent('w', { event: 'order.paid', key: 'patched' });
        return { patched, got: got?.data };
      },
    });
    const s = make([task]);
    const job = await s.enqueue({ task: 'patched-waiter', payload: {} });
    await tickIdle(s);
    expect((await rows(`SELECT id, kind FROM skiplock.job_step WHERE job_id = $1 ORDER BY seq`, [job.id])).map((r) => r.kind)).toEqual(['patch', 'event']);
    await s.sendEvent({ name: 'order.paid', key: 'patched', data: 1 });
    await tickIdle(s);
    expect((await s.getJob(job.id))!.result).toEqual({ patched: true, got: 1 });
  });
});

describe('retention', () => {
  test('events older than retention.eventsMs go with the retention pass, in its one statement', async () => {
    const s = make([waiter()]);
    await s.sendEvent({ name: 'old.one' });
    await rows(`UPDATE skiplock.event SET created_at = now() - interval '8 days'`);
    await s.sendEvent({ name: 'new.one' });
    expect(await s.prune()).toBe(1);
    expect((await rows(`SELECT name FROM skiplock.event`)).map((r) => r.name)).toEqual(['new.one']);
    await rows(`UPDATE skiplock.event SET created_at = now() - interval '2 hours'`);
    expect(await s.prune({ eventsMs: 3_600_000 })).toBe(1);
  });
});
