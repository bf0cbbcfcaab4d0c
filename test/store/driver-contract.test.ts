/**
 * One contract, every driver: pg over TCP, Neon's HTTP driver and Neon's WebSocket Pool (both
 * through the local Neon proxy), all on the same real PostgreSQL.
 */
import ws from 'ws';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { z } from 'zod';
import { startNeonProxy, type NeonProxy } from '../../src/dev/neon-proxy.ts';
import { createSkiplock, defineTask } from '../../src/index.ts';
import { createNeonHttpDriver } from '../../src/store/drivers/neon-http.ts';
import { createNeonWsDriver } from '../../src/store/drivers/neon-ws.ts';
import { databaseUrlProblem, pgUrlOptions } from '../../src/store/drivers/database-url.ts';
import { createPgDriver } from '../../src/store/drivers/pg.ts';
import { completeAndClaim } from '../../src/store/claim.ts';
import { getJob } from '../../src/store/admin.ts';
import { insertJobs } from '../../src/store/enqueue.ts';
import type { NewJobRow } from '../../src/store/job-row.ts';
import { mapClaimedJob, mapJob } from '../../src/store/rows.ts';
import { migrate } from '../../src/store/migrate.ts';
import { loadMigrations } from '../../src/store/migrations-fs.ts';
import { sqlState, statement, type Sql } from '../../src/store/sql.ts';
import { createTestDb, type TestDb } from '../support/db.ts';

let proxy: NeonProxy;
beforeAll(async () => (proxy = await startNeonProxy()));
afterAll(() => proxy.close());

const drivers: Record<string, (url: string) => Sql> = {
  pg: (url) => createPgDriver(url),
  'neon-http': (url) => createNeonHttpDriver(url, { fetchEndpoint: proxy.fetchEndpoint }),
  'neon-ws': (url) => createNeonWsDriver(url, { wsProxy: proxy.wsProxy, webSocketConstructor: ws }),
};

const newJob = (over: Partial<NewJobRow>): NewJobRow => ({
  task: 'noop', payload: {}, priority: 0, run_at: null, delay_ms: 0, max_attempts: 5, timeout_ms: 10_000,
  idempotency_key: null, schedule_name: null, scheduled_for: null, ...over,
});

describe.each(Object.keys(drivers))('driver %s', (name) => {
  let db: TestDb;
  let sql: Sql;
  beforeAll(async () => {
    db = await createTestDb();
    sql = drivers[name]!(db.url);
  });
  afterAll(async () => {
    await sql.close();
    await db.drop();
  });

  test('query returns rows with the types every driver agrees on', async () => {
    const [row] = await sql.query(
      statement(
        `SELECT $1::bigint AS big, $2::timestamptz AS at, $3::jsonb AS doc, $4::text[] AS tags, true AS yes, NULL::text AS nothing, 42::int AS small`,
        ['9007199254740993', '2026-03-29T01:30:00.000Z', JSON.stringify({ a: [1, 'two'] }), ['x', 'y']],
      ),
    );
    expect(row).toEqual({
      big: '9007199254740993',
      at: new Date('2026-03-29T01:30:00.000Z'),
      doc: { a: [1, 'two'] },
      tags: ['x', 'y'],
      yes: true,
      nothing: null,
      small: 42,
    });
  });

  test('batch is one transaction: all or nothing', async () => {
    await sql.query(statement(`CREATE TABLE IF NOT EXISTS contract_t (k text PRIMARY KEY)`));
    const results = await sql.batch([
      statement(`INSERT INTO contract_t VALUES ('a') RETURNING k`),
      statement(`SELECT count(*)::int AS n FROM contract_t`),
    ]);
    expect(results).toEqual([[{ k: 'a' }], [{ n: 1 }]]);
    const failing = sql.batch([statement(`INSERT INTO contract_t VALUES ('b')`), statement(`INSERT INTO contract_t VALUES ('a')`)]);
    await expect(failing).rejects.toSatisfy((error: unknown) => sqlState(error) === '23505');
    expect(await sql.query(statement(`SELECT k FROM contract_t ORDER BY k`))).toEqual([{ k: 'a' }]);
  });

  test('migrations apply over it on an empty database', async () => {
    const empty = await createTestDb({ migrated: false });
    const emptySql = drivers[name]!(empty.url);
    try {
      const migrations = await loadMigrations();
      const [first, second] = await Promise.all([migrate(emptySql, migrations), migrate(emptySql, migrations)]);
      expect([...first!.applied, ...second!.applied].sort()).toEqual(migrations.map((m) => m.id).sort());
    } finally {
      await emptySql.close();
      await empty.drop();
    }
  });

  test('the whole job cycle runs over it: enqueue, claim, retry, complete, reap, cancel', async () => {
    const ran: number[] = [];
    const task = defineTask({
      name: 'contract',
      payload: z.object({ n: z.number() }),
      backoff: () => 0,
      handler: (p, ctx) => {
        if (p.n === 0 && ctx.attempt === 1) throw new Error('once');
        ran.push(p.n);
        return { n: p.n };
      },
    });
    const skiplock = createSkiplock({ sql, tasks: [task], log: () => {} });
    const enqueued = await skiplock.enqueueBatch(Array.from({ length: 50 }, (_, n) => ({ task: 'contract', payload: { n } })));
    const replay = await skiplock.enqueueBatch([{ task: 'contract', payload: { n: 99 }, idempotencyKey: 'k1' }]);
    const again = await skiplock.enqueueBatch([{ task: 'contract', payload: { n: 99 }, idempotencyKey: 'k1' }]);
    expect(again[0]).toMatchObject({ created: false, job: { id: replay[0]!.job.id } });
    const [a, b] = await Promise.all([
      skiplock.tick({ untilIdle: true, concurrency: 7 }),
      skiplock.tick({ untilIdle: true, concurrency: 7 }),
    ]);
    expect(a!.claimed + b!.claimed).toBe(52);
    expect(a!.done + b!.done).toBe(51);
    expect(ran.sort((x, y) => x - y)).toEqual([...Array.from({ length: 50 }, (_, n) => n), 99]);
    expect(await skiplock.getJob(enqueued[0]!.job.id)).toMatchObject({ status: 'DONE', attempts: 2, result: { n: 0 } });
    expect(await skiplock.reap()).toBe(0);
    // A cancel is a transaction of two statements (lock, then cancel with its cascade).
    const queued = await skiplock.enqueue({ task: 'contract', payload: { n: 100 }, delayMs: 60_000 });
    expect(await skiplock.cancelJob(queued.id)).toMatchObject({ outcome: 'cancelled', job: { status: 'CANCELLED' } });
    await expect(skiplock.cancelJob(queued.id)).rejects.toMatchObject({ code: 'conflict' });
  });

  test('events run over it: a wait, a send (a batch: lock, store + wake + start, cancelOn), an early event, a callback', async () => {
    const urls: string[] = [];
    const waiter = defineTask({
      name: 'ev-waiter',
      payload: z.object({ key: z.string() }),
      cancelOn: [{ event: 'ev.stop', key: (p) => p.key }],
      handler: async (p, ctx) => {
        const got = await ctx.waitForEvent('w', { event: 'ev.go', key: p.key });
        const { url } = await ctx.createCallback('cb');
        urls.push(url);
        return { got, cb: await ctx.waitForCallback('cb') };
      },
    });
    const started = defineTask({ name: 'ev-started', payload: z.object({ n: z.number() }), on: 'ev.go', handler: (p) => p });
    const skiplock = createSkiplock({ sql, tasks: [waiter, started], log: () => {}, callbacks: { secret: 'driver-contract-secret', publicUrl: 'http://x.test' } });
    const a = await skiplock.enqueue({ task: 'ev-waiter', payload: { key: 'a' } });
    const b = await skiplock.enqueue({ task: 'ev-waiter', payload: { key: 'b' } });
    const c = await skiplock.enqueue({ task: 'ev-waiter', payload: { key: 'c' } });
    const early = await skiplock.sendEvent({ name: 'ev.go', key: 'b', data: { n: 2 } });
    expect(early).toMatchObject({ woken: 0, started: 1 });
    await skiplock.tick({ untilIdle: true });
    const sent = await skiplock.sendEvent({ name: 'ev.go', key: 'a', data: { n: 1 }, idempotencyKey: 'go-a' });
    expect(sent).toMatchObject({ woken: 1, started: 1, created: true });
    expect(await skiplock.sendEvent({ name: 'ev.go', key: 'a', idempotencyKey: 'go-a' })).toMatchObject({ id: sent.id, created: false });
    expect(await skiplock.sendEvent({ name: 'ev.stop', key: 'c' })).toMatchObject({ cancelled: 1 });
    await skiplock.tick({ untilIdle: true });
    for (const url of new Set(urls)) expect(await skiplock.completeCallback(url.split('/').pop()!, { ok: url })).toBe('completed');
    await skiplock.tick({ untilIdle: true });
    expect(await skiplock.getJob(a.id)).toMatchObject({ status: 'DONE', result: { got: { data: { n: 1 }, eventId: sent.id } } });
    expect(await skiplock.getJob(b.id)).toMatchObject({ status: 'DONE', result: { got: { data: { n: 2 }, eventId: early.id } } });
    expect(await skiplock.getJob(c.id)).toMatchObject({ status: 'CANCELLED' });
    expect((await skiplock.listJobs({ task: 'ev-started' })).jobs).toHaveLength(2);
  });

  const claim = (workerId: string, results: Parameters<typeof completeAndClaim>[0]['results'] = []) =>
    sql.query(completeAndClaim({ now: null, workerId, results, limit: 10, budgetMs: 60_000, leaseMs: 30_000, leaseGraceMs: 5_000, tasks: ['noop'] }));

  // One job is inserted by a plain INSERT with its fields as parameters (issue 23: the enqueue a
  // route sends); more by the JSON batch statement. The row and the answer must be the same.
  test('an enqueue of one job leaves the row a batch enqueue leaves, and answers alike', async () => {
    await db.emptyJobs();
    const at = new Date('2026-05-06T07:08:09.123Z');
    const full = (key: string | null): NewJobRow => newJob({
      payload: { text: 'a "quoted" \\ back,slash {brace} ü ✓', list: [1, null, { deep: true }] }, priority: -3, delay_ms: 1_500,
      max_attempts: 7, timeout_ms: 4_321, idempotency_key: key, schedule_name: 'nightly', scheduled_for: '2026-02-03T04:05:06.789Z',
      traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01', flow_key: 'tenant-1', rate_key: 'rate "1"', cancel_on: ['order.cancelled o-1', 'x,y'],
    });
    const cases: [NewJobRow, NewJobRow][] = [
      [full(null), full(null)],
      [full('one-1'), full('batch-1')],
      [newJob({ payload: 'µs', run_at: '2026-01-01T00:00:00.999999Z' }), newJob({ payload: 'µs', run_at: '2026-01-01T00:00:00.999999Z' })],
    ];
    // Every column, the internal ones too (flow keys, cancelOn), as the driver returns them.
    const comparable = (row: Record<string, unknown>) => {
      const { id: _, idempotency_key: __, ...rest } = row;
      return rest;
    };
    for (const [one, batched] of cases) {
      const [single] = await sql.query(insertJobs({ now: at, jobs: [one] }));
      const [fromBatch] = await sql.query(insertJobs({ now: at, jobs: [batched, newJob({})] }));
      expect(comparable(single!)).toEqual(comparable(fromBatch!));
    }
    // A key already taken: nothing is written, and the job holding it is the answer.
    const [again, ...more] = await sql.query(insertJobs({ now: at, jobs: [newJob({ payload: 'other', idempotency_key: 'one-1' })] }));
    expect(more).toHaveLength(0);
    expect(again!.inserted).toBe(false);
    expect(mapJob(again!).payload).toEqual(full(null).payload);
  });

  // A batch of plain DONE results is written by a leaner statement (issue 23: arrays, no JSON, no
  // CASE per column). Each row it leaves must be the row the general write leaves for the same result.
  test('a DONE batch written as arrays leaves each row as the general write does', async () => {
    await db.emptyJobs();
    const at = new Date('2026-05-06T07:08:09.123Z');
    const write = (results: Parameters<typeof completeAndClaim>[0]['results'], general: boolean) =>
      sql.query(completeAndClaim({ now: at, workerId: 'w', results, limit: 0, budgetMs: 60_000, leaseMs: 30_000, leaseGraceMs: 5_000, tasks: ['noop'], fanIn: general }));
    await sql.query(insertJobs({ now: at, jobs: Array.from({ length: 12 }, (_, i) => newJob({ payload: { i } })) }));
    await sql.query(insertJobs({ now: at, jobs: [newJob({ payload: 'progress before' })] }));
    const claimed = (await sql.query(completeAndClaim({ now: at, workerId: 'w#1', results: [], limit: 20, budgetMs: 60_000, leaseMs: 30_000, leaseGraceMs: 5_000, tasks: ['noop'] })))
      .filter((r) => r.id !== null).map((r) => ({ id: String(r.id), attempts: Number(r.attempts) }));
    expect(claimed).toHaveLength(13);
    const outcomes = [
      { result: { text: 'a "quoted" \\ back,slash {brace} ü ✓', nested: [1, null, { deep: true }] }, progress: { value: null }, trace: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01' },
      { result: null },
      { result: 'NULL', progress: { value: [1, 2] } },
      { result: 42, progress: { value: undefined } },
      { result: [] as unknown[], progress: { value: 'half' } },
      { result: undefined },
    ];
    const rows = (slice: typeof claimed) => slice.map((c, i) => ({ id: c.id, attempt: c.attempts, status: 'DONE' as const, error: null, delay_ms: 0, release: false, locked_by: 'w#1', ...outcomes[i]! }));
    const lean = rows(claimed.slice(0, 6));
    const general = rows(claimed.slice(6, 12));
    // A stale write (another attempt's) lands in neither.
    const [stale] = rows(claimed.slice(12));
    // Progress the handlers reported while they ran: a result's progress of null clears it, an
    // absent one keeps it.
    await sql.query(statement(`UPDATE skiplock.job SET progress = '"before"' WHERE status = 'RUNNING'`));
    const [leanAnswer] = await write([...lean, { ...stale!, attempt: stale!.attempt + 1 }], false);
    const [generalAnswer] = await write([...general, { ...stale!, attempt: stale!.attempt + 1 }], true);
    expect([...(leanAnswer!.written as string[])].sort()).toEqual(lean.map((r) => r.id).sort());
    expect([...(generalAnswer!.written as string[])].sort()).toEqual(general.map((r) => r.id).sort());
    // Every column, as the driver returns it, but the id and the payload (which differ by design).
    const stored = async (id: string) => {
      const { id: _, payload: __, ...rest } = (await sql.query(getJob({ id })))[0]!;
      return rest;
    };
    for (let i = 0; i < 6; i++) expect(await stored(lean[i]!.id)).toEqual(await stored(general[i]!.id));
    expect((await stored(lean[0]!.id)).result).toEqual(outcomes[0]!.result);
    expect(await Promise.all([0, 1, 2, 3].map(async (i) => (await stored(lean[i]!.id)).progress))).toEqual([null, 'before', [1, 2], 'before']);
    expect((await stored(stale!.id)).status).toBe('RUNNING');
  });

  // The claim returns a narrow answer (issue 23: CLAIMED_COLUMNS, times as epoch milliseconds), not
  // the row: what a handler gets as ctx.job must still be the row the claim left, to the millisecond.
  test('each claimed job maps to the Job its row holds after the claim', async () => {
    await db.emptyJobs();
    await sql.query(insertJobs({
      now: null,
      jobs: [
        newJob({ payload: { n: 1, text: 'ü ✓' }, priority: 5, idempotency_key: 'key-1', traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01' }),
        // Microseconds that a float would round up: the Date must truncate them, as the text does.
        newJob({ payload: 'µs', run_at: '2026-01-01T00:00:00.999999Z' }),
        newJob({ payload: 'x', schedule_name: 'nightly', scheduled_for: '2026-02-03T04:05:06.789Z', max_attempts: 3, timeout_ms: 1_234 }),
        newJob({ payload: ['retried'] }),
      ],
    }));
    const first = (await claim('w#1')).filter((r) => r.id !== null);
    expect(first).toHaveLength(4);
    const checkAgainstTable = async (row: Record<string, unknown>, token: string) => {
      const [stored] = await sql.query(getJob({ id: String(row.id) }));
      expect(mapClaimedJob(row, token)).toEqual(mapJob(stored!));
    };
    for (const row of first) await checkAgainstTable(row, 'w#1');
    expect(mapClaimedJob(first.find((r) => r.payload === 'µs')!, 'w#1').runAt.toISOString()).toBe('2026-01-01T00:00:00.999Z');

    // One fails its attempt: claimed again, it carries a history and a last error.
    const failed = first.find((r) => Array.isArray(r.payload))!;
    await claim('w#2', [{ id: String(failed.id), attempt: Number(failed.attempts), status: 'QUEUED', result: null, error: 'boom', delay_ms: 0, release: false, locked_by: 'w#1' }]);
    const [again] = (await claim('w#3')).filter((r) => r.id !== null);
    expect(again?.id).toEqual(failed.id);
    await checkAgainstTable(again!, 'w#3');
    const retried = mapClaimedJob(again!, 'w#3');
    expect(retried.history).toHaveLength(1);
    expect(retried.lastError).toBe('boom');
    expect(retried.attempts).toBe(2);
  });

  test('fair share and batch handlers run over it (issue 35)', async () => {
    const order: string[] = [];
    const calls: number[] = [];
    const fair = defineTask({ name: 'fair', payload: z.object({ t: z.string() }), fairness: { key: (p) => p.t }, handler: (p) => void order.push(p.t) });
    const batched = defineTask({
      name: 'batched', payload: z.object({ n: z.number() }), batch: { maxSize: 10, maxWaitMs: 0 },
      handler: async (items, ctx) => {
        calls.push(items.length);
        ctx.fail(items[0]!.id, new Error('first item fails once'));
        return items.slice(1).map((i) => ({ id: i.id, result: i.payload.n }));
      },
    });
    const skiplock = createSkiplock({ sql, tasks: [fair, batched], log: () => {}, retention: false });
    await skiplock.enqueueBatch([...Array.from({ length: 20 }, () => ({ task: 'fair' as const, payload: { t: 'big' } })), { task: 'fair' as const, payload: { t: 'small' } }]);
    const items = await skiplock.enqueueBatch(Array.from({ length: 25 }, (_, n) => ({ task: 'batched', payload: { n } })));
    await skiplock.tick({ untilIdle: true, concurrency: 4 });
    expect(order.slice(0, 4)).toContain('small');
    expect(order).toHaveLength(21);
    expect(calls.slice(0, 3)).toEqual([10, 10, 5]);
    const second = await skiplock.getJob(items[1]!.job.id);
    expect(second).toMatchObject({ status: 'DONE', result: 1, batchKey: '' });
  });
});

describe('connection strings as users paste them', () => {
  test("Neon's ?sslmode=require&channel_binding=require: verify-full (what pg 8 does with require, without its warning) and channel binding", () => {
    const neon = 'postgresql://alex:AbC123@ep-cool-darkness-123456-pooler.us-east-2.aws.neon.tech/neondb?sslmode=require&channel_binding=require';
    expect(pgUrlOptions(neon)).toStrictEqual({
      connectionString: 'postgresql://alex:AbC123@ep-cool-darkness-123456-pooler.us-east-2.aws.neon.tech/neondb?sslmode=verify-full',
      enableChannelBinding: true,
    });
    expect(pgUrlOptions('postgres://u:p@h/db?sslmode=verify-full').connectionString).toBe('postgres://u:p@h/db?sslmode=verify-full');
    expect(pgUrlOptions('postgres://u:p@h/db?sslmode=disable').connectionString).toBe('postgres://u:p@h/db?sslmode=disable');
    expect(pgUrlOptions('postgres://u:p@h/db?uselibpqcompat=true&sslmode=require').connectionString).toBe('postgres://u:p@h/db?uselibpqcompat=true&sslmode=require');
    expect(pgUrlOptions('postgres://u:p@h/db')).toStrictEqual({ connectionString: 'postgres://u:p@h/db' });
  });

  test('pg prints no SECURITY WARNING for them', async () => {
    const warnings: string[] = [];
    const onWarning = (warning: Error) => warnings.push(warning.message);
    process.on('warning', onWarning);
    try {
      const sql = createPgDriver('postgres://u:p@127.0.0.1:1/db?sslmode=require&channel_binding=require', { connectionTimeoutMillis: 2_000 });
      await sql.query(statement('SELECT 1')).catch(() => {});
      await sql.close();
      await new Promise((resolve) => setImmediate(resolve));
    } finally {
      process.off('warning', onWarning);
    }
    expect(warnings.filter((w) => w.includes('SECURITY WARNING'))).toStrictEqual([]);
  });

  test('a malformed one is named, with what was expected, and never shows its password', () => {
    expect(databaseUrlProblem('notaurl')).toBe('DATABASE_URL is not a PostgreSQL URL (postgres://user:password@host:port/database): got "notaurl"');
    expect(databaseUrlProblem('mysql://u:secret@h/db')).toBe('DATABASE_URL is not a PostgreSQL URL (postgres://user:password@host:port/database): got "mysql://u:***@h/db"');
    expect(databaseUrlProblem('postgres://u:secret@h:99999/db')).toMatch(/got "postgres:\/\/u:\*\*\*@h:99999\/db"/);
    for (const ok of ['postgres://u:p@h:5432/db', 'postgresql://h/db?sslmode=require', '/var/run/postgresql', 'socket:/tmp?db=x']) expect(databaseUrlProblem(ok)).toBeUndefined();
  });
});
