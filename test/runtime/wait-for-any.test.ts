/**
 * ctx.waitForAny (issue 35 item 3; src/runtime/steps/event-waits.ts, src/store/event-waits.ts,
 * src/store/events.ts): the first of several (event, key) alternatives wins — whichever is sent
 * first, the timeout, an event sent before the wait; two sent at once, one wins and the other stays
 * for a later wait; a step, so replays and retries return the same answer; the send/wait race over
 * several names, with parallel workers; bad input; cancel; over Neon's HTTP driver.
 */
import pg from 'pg';
import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'vitest';
import { z } from 'zod';
import { createSkiplock, defineTask } from '../../src/index.ts';
import { eventLock, sendEvent } from '../../src/store/events.ts';
import { statement, type Sql } from '../../src/store/sql.ts';
import { createTestDb, type TestDb } from '../support/db.ts';
import { flaky, sleep, tickUntilStopped, untilAllDone, untilSent } from '../support/race.ts';

let db: TestDb;
beforeAll(async () => {
  db = await createTestDb();
});
afterAll(() => db.drop());
beforeEach(async () => {
  await db.emptyJobs('skiplock.event');
});

const quiet = () => {};
const T0 = new Date('2026-06-01T12:00:00.000Z');
const at = (ms: number) => new Date(T0.getTime() + ms);
const rows = (text: string, values: unknown[] = []) => db.sql.query<Record<string, any>>(statement(text, values));

/** An approval, a rejection or a timeout: the example. */
const decision = defineTask({
  name: 'decision',
  payload: z.object({ key: z.string(), timeoutMs: z.number().optional() }),
  timeoutMs: 5_000,
  handler: async (p, ctx) => ({
    got: await ctx.waitForAny('decide', [{ event: 'order.approved', key: p.key }, { event: 'order.rejected', key: p.key }], { timeoutMs: p.timeoutMs }),
  }),
});

describe('the first alternative wins', () => {
  let clock = 0;
  const make = () => createSkiplock({ sql: db.sql, tasks: [decision], now: () => at(clock), log: quiet, retention: false });

  test.each(['order.approved', 'order.rejected'])('%s sent first: the wait returns it, nothing is left waiting', async (name) => {
    clock = 0;
    const s = make();
    const job = await s.enqueue({ task: 'decision', payload: { key: 'k1' } });
    await s.tick({ untilIdle: true });
    expect(await s.getJob(job.id)).toMatchObject({ status: 'WAITING' });
    clock = 10;
    const sent = await s.sendEvent({ name, key: 'k1', data: { by: 'ada' } });
    expect(sent.woken).toBe(1);
    // The other alternative, sent after, wakes nothing: the wait ended with the first.
    const other = name === 'order.approved' ? 'order.rejected' : 'order.approved';
    expect((await s.sendEvent({ name: other, key: 'k1' })).woken).toBe(0);
    await s.tick({ untilIdle: true });
    expect(await s.getJob(job.id)).toMatchObject({ status: 'DONE', result: { got: { event: name, key: 'k1', data: { by: 'ada' }, eventId: sent.id } } });
    expect(await rows(`SELECT kind, status, event_id::text AS event_id FROM skiplock.job_step WHERE job_id = $1`, [job.id])).toEqual([
      { kind: 'any-event', status: 'done', event_id: sent.id },
    ]);
    const detail = await s.getJobDetail(job.id);
    expect(detail?.steps[0]).toMatchObject({
      id: 'decide', kind: 'any-event', status: 'done', eventId: sent.id,
      eventAlternatives: [{ event: 'order.approved', key: 'k1' }, { event: 'order.rejected', key: 'k1' }],
    });
  });

  test('an event of another key, or of a name not listed, does not end the wait', async () => {
    clock = 0;
    const s = make();
    const job = await s.enqueue({ task: 'decision', payload: { key: 'mine' } });
    await s.tick({ untilIdle: true });
    expect((await s.sendEvent({ name: 'order.approved', key: 'theirs' })).woken).toBe(0);
    expect((await s.sendEvent({ name: 'order.approved' })).woken).toBe(0);
    expect((await s.sendEvent({ name: 'order.shipped', key: 'mine' })).woken).toBe(0);
    await s.tick({ untilIdle: true });
    expect(await s.getJob(job.id)).toMatchObject({ status: 'WAITING' });
  });

  test('an alternative without a key matches every key of its name', async () => {
    const anyKey = defineTask({
      name: 'any-key',
      payload: z.object({}),
      handler: async (_p, ctx) => ctx.waitForAny('w', [{ event: 'a.done', key: 'x' }, { event: 'b.done' }]),
    });
    const s = createSkiplock({ sql: db.sql, tasks: [anyKey], log: quiet, retention: false });
    const job = await s.enqueue({ task: 'any-key', payload: {} });
    await s.tick({ untilIdle: true });
    const sent = await s.sendEvent({ name: 'b.done', key: 'whatever', data: 7 });
    expect(sent.woken).toBe(1);
    await s.tick({ untilIdle: true });
    expect(await s.getJob(job.id)).toMatchObject({ status: 'DONE', result: { event: 'b.done', key: 'whatever', data: 7, eventId: sent.id } });
  });

  test('the timeout first: WAITING until it, then null; an event at or after it is not taken', async () => {
    clock = 0;
    const s = make();
    const job = await s.enqueue({ task: 'decision', payload: { key: 'slow', timeoutMs: 300 } });
    await s.tick({ untilIdle: true });
    expect(await s.getJob(job.id)).toMatchObject({ status: 'WAITING', runAt: at(300) });
    clock = 300;
    expect((await s.sendEvent({ name: 'order.approved', key: 'slow' })).woken).toBe(0);
    await s.tick({ untilIdle: true });
    expect(await s.getJob(job.id)).toMatchObject({ status: 'DONE', result: { got: null } });
  });

  test('events sent before the wait is reached count: the earliest stored wins', async () => {
    clock = 0;
    const s = make();
    const job = await s.enqueue({ task: 'decision', payload: { key: 'early' } });
    clock = 5;
    const first = await s.sendEvent({ name: 'order.rejected', key: 'early', data: 'no' });
    clock = 6;
    await s.sendEvent({ name: 'order.approved', key: 'early', data: 'yes' });
    clock = 7;
    await s.tick({ untilIdle: true });
    expect(await s.getJob(job.id)).toMatchObject({ status: 'DONE', result: { got: { event: 'order.rejected', data: 'no', eventId: first.id } } });
  });

  test('an event sent before the job was created does not count', async () => {
    clock = 0;
    const s = make();
    await s.sendEvent({ name: 'order.approved', key: 'old' });
    clock = 1;
    const job = await s.enqueue({ task: 'decision', payload: { key: 'old' } });
    await s.tick({ untilIdle: true });
    expect(await s.getJob(job.id)).toMatchObject({ status: 'WAITING' });
  });
});

describe('two events at once', () => {
  test('exactly one wins; the other stays unconsumed for a later ctx.waitForEvent of the job', async () => {
    const both = defineTask({
      name: 'both',
      payload: z.object({ key: z.string() }),
      handler: async (p, ctx) => {
        const first = await ctx.waitForAny('first', [{ event: 'x.a', key: p.key }, { event: 'x.b', key: p.key }]);
        const other = first!.event === 'x.a' ? 'x.b' : 'x.a';
        const second = await ctx.waitForEvent('second', { event: other, key: p.key });
        return { first, second };
      },
    });
    const s = createSkiplock({ sql: db.sql, tasks: [both], log: quiet, retention: false });
    const keys = Array.from({ length: 20 }, (_, i) => `two-${i}`);
    const jobs = await s.enqueueBatch(keys.map((key) => ({ task: 'both' as const, payload: { key } })));
    await s.tick({ untilIdle: true });
    const sent = await Promise.all(keys.map((key) => Promise.all([s.sendEvent({ name: 'x.a', key, data: 'a' }), s.sendEvent({ name: 'x.b', key, data: 'b' })])));
    await s.tick({ untilIdle: true });
    for (const [i, job] of jobs.entries()) {
      const [a, b] = sent[i]!;
      const got = (await s.getJob(job.job.id))!;
      expect(got.status).toBe('DONE');
      const result = got.result as { first: { event: string; eventId: string }; second: { eventId: string } };
      expect([result.first.eventId, result.second.eventId].sort()).toEqual([a.id, b.id].sort());
      // Exactly one send completed the any-wait; the other woke the job only by its second wait, if at all.
      expect(a.woken + b.woken).toBeGreaterThanOrEqual(1);
    }
  });
});

describe("the job's waits share its events", () => {
  test('parallel waits take their events in call order; a later wait skips the one the any-wait took', async () => {
    const sharing = defineTask({
      name: 'sharing',
      payload: z.object({}),
      handler: async (_p, ctx) => {
        const [any, one] = await Promise.all([
          ctx.waitForAny('any', [{ event: 's.a' }, { event: 's.b' }]),
          ctx.waitForEvent('one', { event: 's.a' }),
        ]);
        const after = await ctx.waitForEvent('after', { event: 's.a' });
        return [any!.eventId, one!.eventId, after!.eventId];
      },
    });
    const s = createSkiplock({ sql: db.sql, tasks: [sharing], log: quiet, retention: false });
    const job = await s.enqueue({ task: 'sharing', payload: {} });
    const a1 = await s.sendEvent({ name: 's.a', data: 1 });
    const a2 = await s.sendEvent({ name: 's.a', data: 2 });
    await s.tick({ untilIdle: true });
    expect(await s.getJob(job.id)).toMatchObject({ status: 'WAITING' });
    const a3 = await s.sendEvent({ name: 's.a', data: 3 });
    expect(a3.woken).toBe(1);
    await s.tick({ untilIdle: true });
    expect(await s.getJob(job.id)).toMatchObject({ status: 'DONE', result: [a1.id, a2.id, a3.id] });
  });
});

describe('a step: replays, retries, ctx.patched and the replay check', () => {
  test('a replay returns the same answer, even with a newer event of another alternative stored', async () => {
    const seen: string[] = [];
    let clock = 0;
    const replayed = defineTask({
      name: 'replayed',
      payload: z.object({}),
      handler: async (_p, ctx) => {
        const got = await ctx.waitForAny('w', [{ event: 'r.a' }, { event: 'r.b' }]);
        seen.push(got!.eventId);
        await ctx.sleep('nap', 1_000);
        return ctx.step('after', () => got);
      },
    });
    const s = createSkiplock({ sql: db.sql, tasks: [replayed], now: () => at(clock), log: quiet, retention: false });
    const job = await s.enqueue({ task: 'replayed', payload: {} });
    clock = 1;
    const a = await s.sendEvent({ name: 'r.a', data: 1 });
    await s.tick({ untilIdle: true });
    clock = 2;
    await s.sendEvent({ name: 'r.b', data: 2 });
    // The sleeping job is checked against its history, then runs again from the top: the recorded wait answers.
    expect(await s.checkReplay({ ids: [job.id] })).toMatchObject({ checked: 1, failures: [] });
    clock = 2_000;
    await s.tick({ untilIdle: true });
    expect(await s.getJob(job.id)).toMatchObject({ status: 'DONE', result: { event: 'r.a', data: 1, eventId: a.id } });
    // The first run, the replay check, the run after the sleep: the same event each time.
    expect(seen).toEqual([a.id, a.id, a.id]);
  });

  test('a retry after a crash after the wait gets the same event', async () => {
    let crashes = 0;
    const crashy = defineTask({
      name: 'crashy',
      payload: z.object({}),
      maxAttempts: 3,
      backoff: () => 0,
      handler: async (_p, ctx) => {
        const got = await ctx.waitForAny('w', [{ event: 'c.a' }, { event: 'c.b' }]);
        if (crashes++ === 0) throw new Error('crash after the wait');
        return got;
      },
    });
    const s = createSkiplock({ sql: db.sql, tasks: [crashy], log: quiet, retention: false });
    const job = await s.enqueue({ task: 'crashy', payload: {} });
    const b = await s.sendEvent({ name: 'c.b', data: 'b' });
    await s.tick({ untilIdle: true });
    await s.sendEvent({ name: 'c.a', data: 'a' });
    await s.tick({ untilIdle: true });
    expect(await s.getJob(job.id)).toMatchObject({ status: 'DONE', attempts: 2, result: { event: 'c.b', eventId: b.id } });
  });

  test('ctx.patched before it: the marker rides on the wait write; the replay check tells a changed kind', async () => {
    const v2 = defineTask({
      name: 'patched-any',
      payload: z.object({}),
      handler: async (_p, ctx) => {
        const fresh = ctx.patched('new-path');
        const got = await ctx.waitForAny('w', [{ event: 'p.a' }, { event: 'p.b' }]);
        return { fresh, got };
      },
    });
    const s = createSkiplock({ sql: db.sql, tasks: [v2], log: quiet, retention: false });
    const job = await s.enqueue({ task: 'patched-any', payload: {} });
    await s.tick({ untilIdle: true });
    expect(await rows(`SELECT id, kind, status FROM skiplock.job_step WHERE job_id = $1 ORDER BY seq`, [job.id])).toEqual([
      { id: 'patched:new-path', kind: 'patch', status: 'done' },
      { id: 'w', kind: 'any-event', status: 'waiting' },
    ]);
    await s.sendEvent({ name: 'p.b' });
    await s.tick({ untilIdle: true });
    expect(await s.getJob(job.id)).toMatchObject({ status: 'DONE', result: { fresh: true, got: { event: 'p.b' } } });

    // New code that waits for one event where the job recorded a waitForAny: the check says so.
    const v3 = defineTask({
      name: 'patched-any',
      payload: z.object({}),
      handler: async (_p, ctx) => {
        ctx.patched('new-path');
        return ctx.waitForEvent('w', { event: 'p.a' });
      },
    });
    const checker = createSkiplock({ sql: db.sql, tasks: [v3], log: quiet, retention: false });
    const report = await checker.checkReplay({ ids: [job.id], status: ['DONE'] });
    expect(report.failures).toHaveLength(1);
    expect(report.failures[0]!.reason).toMatch(/"w" was a ctx\.any-event in an earlier run and is a ctx\.event now/);
  });
});

describe('bad input and cancel', () => {
  const bad: [string, unknown, unknown][] = [
    ['an empty list', [], {}],
    ['not a list', { event: 'a' }, {}],
    ['21 alternatives', Array.from({ length: 21 }, (_, i) => ({ event: `e${i}` })), {}],
    ['a bad name', [{ event: 'has space' }], {}],
    ['a bad key', [{ event: 'a', key: '' }], {}],
    ['a duplicate', [{ event: 'a', key: 'k' }, { event: 'a', key: 'k' }], {}],
    ['a bad timeout', [{ event: 'a' }], { timeoutMs: -1 }],
  ];
  test.each(bad)('%s: a TypeError, the job DEAD, nothing written', async (_what, alternatives, options) => {
    const wrong = defineTask({
      name: 'wrong',
      payload: z.object({}),
      handler: async (_p, ctx) => ctx.waitForAny('w', alternatives as never, options as never),
    });
    const s = createSkiplock({ sql: db.sql, tasks: [wrong], log: quiet, retention: false });
    const job = await s.enqueue({ task: 'wrong', payload: {} });
    await s.tick({ untilIdle: true });
    const got = await s.getJob(job.id);
    expect(got).toMatchObject({ status: 'DEAD', attempts: 1 });
    expect(got!.lastError).toMatch(/ctx\.waitForAny\("w"\)/);
    expect(await rows(`SELECT count(*)::int AS n FROM skiplock.job_step WHERE job_id = $1`, [job.id])).toEqual([{ n: 0 }]);
  });

  test('cancelOn and a cancel end the job while it waits', async () => {
    const cancellable = defineTask({
      name: 'cancellable',
      payload: z.object({ key: z.string() }),
      cancelOn: [{ event: 'stop', key: (p) => p.key }],
      handler: async (p, ctx) => ctx.waitForAny('w', [{ event: 'go.a', key: p.key }, { event: 'go.b', key: p.key }], { timeoutMs: 60_000 }),
    });
    const s = createSkiplock({ sql: db.sql, tasks: [cancellable], log: quiet, retention: false });
    const one = await s.enqueue({ task: 'cancellable', payload: { key: 'one' } });
    const two = await s.enqueue({ task: 'cancellable', payload: { key: 'two' } });
    await s.tick({ untilIdle: true });
    expect((await s.sendEvent({ name: 'stop', key: 'one' })).cancelled).toBe(1);
    await s.cancelJob(two.id);
    expect(await s.getJob(one.id)).toMatchObject({ status: 'CANCELLED' });
    expect(await s.getJob(two.id)).toMatchObject({ status: 'CANCELLED' });
    expect((await s.sendEvent({ name: 'go.a', key: 'one' })).woken).toBe(0);
    expect((await s.sendEvent({ name: 'go.b', key: 'two' })).woken).toBe(0);
  });
});

describe('the send/wait race, pinned', () => {
  // A send of one alternative is in its transaction (its event stored, the waits it saw completed:
  // none yet) and not committed, while the job reaches its any-wait. The wait must take that
  // alternative's lock, wait for the send to commit, and then see its event; a wait that skipped
  // the lock would read before the commit, record itself waiting after the send looked, and wait
  // for ever. Whatever the timing: the send's statement ran before the wait was reached.
  test.each([0, 1, 2])('a send of alternative %i committing while the wait registers: the wait takes it', async (which) => {
    const names = ['pin.a', 'pin.b', 'pin.c'];
    const pinned = defineTask({
      name: 'pinned',
      payload: z.object({}),
      handler: async (_p, ctx) => ctx.waitForAny('w', [{ event: names[0]!, key: 'k' }, { event: names[1]! }, { event: names[2]!, key: 'k' }]),
    });
    const s = createSkiplock({ sql: db.sql, tasks: [pinned], log: quiet, retention: false });
    const job = await s.enqueue({ task: 'pinned', payload: {} });
    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    try {
      await client.query('BEGIN');
      const lock = eventLock({ name: names[which]!, key: 'k', for: 'send' });
      await client.query(lock.text, [...lock.values]);
      const send = sendEvent({ now: null, name: names[which]!, key: 'k', data: JSON.stringify(which), idempotencyKey: null, triggered: [], refused: null });
      const [stored] = (await client.query(send.text, [...send.values])).rows;
      expect(stored.woken).toBe(0);
      const ticking = s.tick({ untilIdle: true });
      await sleep(300);
      await client.query('COMMIT');
      await ticking;
      expect(await s.getJob(job.id)).toMatchObject({ status: 'DONE', result: { event: names[which], key: 'k', data: which, eventId: String(stored.id) } });
    } finally {
      await client.end();
    }
  });
});

describe('the wait takes its locks in one order', () => {
  // A send of `d.a` key `k` takes `d.a` (shared), then `d.a k`. A wait listing `d.a` key `k`
  // before `d.a` (any key) must still take `d.a` first: taking `d.a k` first, it would hold what
  // the send waits for while waiting for what the send holds — a deadlock PostgreSQL aborts.
  test('a wait listing a keyed alternative before its name, against a send of that name and key: no deadlock', async () => {
    const ordered = defineTask({
      name: 'ordered',
      payload: z.object({}),
      maxAttempts: 1,
      handler: async (_p, ctx) => ctx.waitForAny('w', [{ event: 'd.a', key: 'k' }, { event: 'd.a' }]),
    });
    const s = createSkiplock({ sql: db.sql, tasks: [ordered], log: quiet, retention: false });
    const job = await s.enqueue({ task: 'ordered', payload: {} });
    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    const run = (st: { text: string; values: readonly unknown[] }) => client.query(st.text, [...st.values]);
    try {
      await client.query('BEGIN');
      await run(eventLock({ name: 'd.a', key: null, for: 'send' })); // the send's first lock
      const ticking = s.tick({ untilIdle: true });
      await sleep(300);
      await run(eventLock({ name: 'd.a', key: 'k', for: 'wait' })); // its second (exclusive, as a send takes it)
      const [stored] = (await run(sendEvent({ now: null, name: 'd.a', key: 'k', data: null, idempotencyKey: null, triggered: [], refused: null }))).rows;
      await client.query('COMMIT');
      await ticking;
      expect(await s.getJob(job.id)).toMatchObject({ status: 'DONE', result: { event: 'd.a', key: 'k', eventId: String(stored.id) } });
    } finally {
      await client.end();
    }
  });
});

describe('the send/wait race over several names', () => {
  const JOBS = Number(process.env.WAIT_ANY_RACE_JOBS ?? 120);
  test(`${JOBS} jobs (two per key, alternatives in opposite orders), events at random moments, parallel and failing workers: no event lost or taken twice, no deadlock`, { timeout: 180_000 }, async () => {
    const task = defineTask({
      name: 'any-racer',
      payload: z.object({ key: z.string(), flip: z.boolean() }),
      timeoutMs: 2_000,
      maxAttempts: 50,
      backoff: () => 20,
      handler: async (p, ctx) => {
        await ctx.step('before', async () => {
          await sleep(Math.random() * 20);
          return 1;
        });
        // The same key's alternatives in the other order, and an alternative without a key listed
        // after its keyed one (the send locks `name` before `name key`): the wait's locks must
        // still be taken in one order, or PostgreSQL aborts a deadlock.
        const alternatives = [{ event: 'race.a', key: p.key }, { event: 'race.b', key: p.key }, { event: 'race.c', key: p.key }];
        const list = p.flip ? [...alternatives].reverse() : alternatives;
        const first = await ctx.waitForAny('first', p.flip ? list : [...list, { event: 'race.none' }]);
        if (!first) throw new Error('no event');
        const rest = ['race.a', 'race.b', 'race.c'].filter((n) => n !== first.event);
        const second = await ctx.waitForAny('second', rest.map((event) => ({ event, key: p.key })));
        const third = await ctx.waitForEvent('third', { event: rest.find((n) => n !== second!.event)!, key: p.key });
        return [first.eventId, second!.eventId, third!.eventId];
      },
    });
    const make = (sql: Sql) => createSkiplock({ sql, tasks: [task], log: quiet, retention: false, tick: { leaseMs: 3_000 } });
    const sender = make(db.sql);
    const keys = Array.from({ length: JOBS / 2 }, (_, i) => `k-${i}`);
    const jobs = await sender.enqueueBatch(keys.flatMap((key) => [false, true].map((flip) => ({ task: 'any-racer' as const, payload: { key, flip } }))));
    const workers = tickUntilStopped([make(db.sql), make(db.sql), make(flaky(db.sql, 0.03))]);
    const eventIds = new Map<string, string[]>();
    const sends = keys.flatMap((key, i) =>
      ['race.a', 'race.b', 'race.c'].map(async (name) => {
        await sleep(i % 4 === 0 ? 0 : Math.random() * 3_000);
        const sent = await untilSent(() => sender.sendEvent({ name, key, data: name, idempotencyKey: `${name}-${key}` }));
        eventIds.set(key, [...(eventIds.get(key) ?? []), sent.id]);
      }),
    );
    await Promise.all(sends);
    await untilAllDone(db.sql, JOBS, 120_000);
    await workers.stop();

    const done = await rows(`SELECT id::text AS id, status, result, last_error, payload FROM skiplock.job ORDER BY id`);
    if (process.env.DEBUG_RACE) console.log(JSON.stringify(done.filter((r) => r.status !== 'DONE').slice(0, 3)), JSON.stringify(await rows(`SELECT job_id, id, kind, status, event_alternatives, event_id FROM skiplock.job_step WHERE job_id IN (1, 2) ORDER BY job_id, seq`)));
    expect(done.filter((r) => r.status !== 'DONE'), 'every job took its three events (none waits for ever)').toEqual([]);
    for (const row of done) expect([...row.result].sort(), `job ${row.id} took each of its key's events once`).toEqual([...eventIds.get(row.payload.key)!].sort());
    // The flaky worker's lost statements fail attempts; a deadlock would name itself in one.
    const deadlocks = await rows(`SELECT count(*)::int AS n FROM skiplock.job j, jsonb_array_elements(j.history) h WHERE h->>'error' ILIKE '%deadlock%'`);
    expect(deadlocks).toEqual([{ n: 0 }]);
    expect(jobs).toHaveLength(JOBS);
  });
});

describe("over Neon's HTTP driver", () => {
  test('an event before the wait, one after, and a timeout', async () => {
    const { startNeonProxy } = await import('../../src/dev/neon-proxy.ts');
    const { createNeonHttpDriver } = await import('../../src/store/drivers/neon-http.ts');
    const proxy = await startNeonProxy();
    const sql = createNeonHttpDriver(db.url, { fetchEndpoint: proxy.fetchEndpoint });
    try {
      // An alternative without a key too: a null in the arrays the statement sends.
      const mixed = defineTask({
        name: 'mixed',
        payload: z.object({}),
        handler: async (_p, ctx) => ctx.waitForAny('w', [{ event: 'm.a', key: 'k' }, { event: 'm.b' }]),
      });
      const s = createSkiplock({ sql, tasks: [decision, mixed], log: quiet, retention: false });
      const mixedJobs = [await s.enqueue({ task: 'mixed', payload: {} }), await s.enqueue({ task: 'mixed', payload: {} })];
      const mixedEarly = await s.sendEvent({ name: 'm.b', key: 'any', data: 'b' });
      const early = await s.enqueue({ task: 'decision', payload: { key: 'n-early' } });
      const late = await s.enqueue({ task: 'decision', payload: { key: 'n-late' } });
      const timed = await s.enqueue({ task: 'decision', payload: { key: 'n-timed', timeoutMs: 0 } });
      const before = await s.sendEvent({ name: 'order.rejected', key: 'n-early', data: 1 });
      await s.tick({ untilIdle: true });
      const after = await s.sendEvent({ name: 'order.approved', key: 'n-late', data: 2 });
      expect(after.woken).toBe(1);
      await s.tick({ untilIdle: true });
      expect(await s.getJob(early.id)).toMatchObject({ status: 'DONE', result: { got: { event: 'order.rejected', key: 'n-early', data: 1, eventId: before.id } } });
      expect(await s.getJob(late.id)).toMatchObject({ status: 'DONE', result: { got: { event: 'order.approved', key: 'n-late', data: 2, eventId: after.id } } });
      expect(await s.getJob(timed.id)).toMatchObject({ status: 'DONE', result: { got: null } });
      // Both mixed jobs took the m.b sent before they ran (each job its own waits).
      for (const job of mixedJobs) expect(await s.getJob(job.id)).toMatchObject({ status: 'DONE', result: { event: 'm.b', key: 'any', eventId: mixedEarly.id } });
      const mixedLate = await s.enqueue({ task: 'mixed', payload: {} });
      await s.tick({ untilIdle: true });
      const sent = await s.sendEvent({ name: 'm.a', key: 'k', data: 'a' });
      expect(sent.woken).toBe(1);
      await s.tick({ untilIdle: true });
      expect(await s.getJob(mixedLate.id)).toMatchObject({ status: 'DONE', result: { event: 'm.a', key: 'k', eventId: sent.id } });
    } finally {
      await sql.close();
      await proxy.close();
    }
  });
});
