/**
 * Transactional enqueue: skiplock.enqueueStatement(input) → { text, values }, run by the caller in
 * their own transaction, on the three ways a user reaches PostgreSQL — a `pg` client between
 * BEGIN and COMMIT, Neon's HTTP `sql.transaction([...])`, Neon's WebSocket Pool — the last two
 * through the local Neon proxy. Rolled back → no job; committed → the job runs; idempotency keys
 * behave as at enqueue.
 */
import { neon, neonConfig, Pool as NeonPool } from '@neondatabase/serverless';
import pg from 'pg';
import ws from 'ws';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { z } from 'zod';
import { startNeonProxy, type NeonProxy } from '../../src/dev/neon-proxy.ts';
import { createSkiplock, defineTask, jobFromRow, SkiplockError, type Row, type Skiplock } from '../../src/index.ts';
import { createPgDriver } from '../../src/pg.ts';
import { createTestDb, type TestDb } from '../support/db.ts';

const fulfil = defineTask({
  name: 'fulfil-order',
  payload: z.object({ orderId: z.string() }),
  handler: ({ orderId }) => ({ shipped: orderId }),
});
const tasks = [fulfil];

/** What each way of running one transaction needs: the user's own write, then the job's insert. */
type RunInTransaction = (statements: { text: string; values: readonly unknown[] }[], commit: boolean) => Promise<unknown[][]>;

let proxy: NeonProxy;
let db: TestDb;
let skiplock: Skiplock<typeof tasks>;
let pgPool: pg.Pool;
let neonPool: NeonPool;

beforeAll(async () => {
  db = await createTestDb();
  proxy = await startNeonProxy();
  await db.sql.query({ text: `CREATE TABLE app_order (id text PRIMARY KEY)`, values: [] });
  skiplock = createSkiplock({ sql: createPgDriver(db.url, { max: 4 }), tasks, log: () => {} });
  pgPool = new pg.Pool({ connectionString: db.url, max: 2 });
  pgPool.on('error', () => {}); // an idle client ended by DROP DATABASE at the end
  Object.assign(neonConfig, {
    fetchEndpoint: proxy.fetchEndpoint,
    wsProxy: proxy.wsProxy,
    webSocketConstructor: ws,
    useSecureWebSocket: false,
    pipelineTLS: false,
    pipelineConnect: false,
  });
  neonPool = new NeonPool({ connectionString: db.url, max: 2 });
});

afterAll(async () => {
  await skiplock?.sql.close();
  await pgPool?.end();
  await neonPool?.end();
  await proxy?.close();
  await db?.drop();
});

/** pg and the Neon Pool: one client, BEGIN … COMMIT or ROLLBACK. */
interface PoolClient {
  query(text: string, values?: unknown[]): Promise<{ rows: unknown[] }>;
  release(): void;
}

function interactive(pool: () => { connect(): Promise<PoolClient> }): RunInTransaction {
  return async (statements, commit) => {
    const client = await pool().connect();
    try {
      await client.query('BEGIN');
      const rows: unknown[][] = [];
      for (const s of statements) rows.push((await client.query(s.text, [...s.values])).rows);
      await client.query(commit ? 'COMMIT' : 'ROLLBACK');
      return rows;
    } finally {
      client.release();
    }
  };
}

const ways: Record<string, RunInTransaction> = {
  'pg client (BEGIN/COMMIT)': interactive(() => pgPool),
  'Neon WebSocket Pool (BEGIN/COMMIT)': interactive(() => neonPool),
  // Non-interactive: the transaction commits unless a statement fails, so "rolled back" is a failing last statement.
  'Neon HTTP sql.transaction([...])': async (statements, commit) => {
    const sql = neon(db.url);
    const queries = statements.map((s) => sql.query(s.text, [...s.values]));
    if (!commit) queries.push(sql.query(`SELECT 1 / 0`));
    return (await sql.transaction(queries)) as unknown[][];
  },
};

const jobsFor = async (orderId: string) =>
  db.sql.query({ text: `SELECT id::text, status, idempotency_key FROM skiplock.job WHERE payload->>'orderId' = $1 ORDER BY id`, values: [orderId] });

test('the statement is exactly { text, values } (what the caller passes on; no hint meant for skiplock\'s own drivers)', () => {
  const statement = skiplock.enqueueStatement({ task: 'fulfil-order', payload: { orderId: 'keys' } });
  expect(Object.keys(statement).sort()).toEqual(['text', 'values']);
});

describe.each(Object.keys(ways))('%s', (way) => {
  const run = ways[way]!;
  const slug = way.split(' ')[0]!.toLowerCase() + way.length;

  test('rolled back: neither the order nor the job exists', async () => {
    const orderId = `${slug}-rolled-back`;
    const insert = { text: `INSERT INTO app_order (id) VALUES ($1)`, values: [orderId] };
    await run([insert, skiplock.enqueueStatement({ task: 'fulfil-order', payload: { orderId } })], false).catch(() => undefined);
    expect(await jobsFor(orderId)).toEqual([]);
    expect(await db.sql.query({ text: `SELECT 1 FROM app_order WHERE id = $1`, values: [orderId] })).toEqual([]);
  });

  test('committed: the job exists with the order, and the next tick runs it', async () => {
    const orderId = `${slug}-committed`;
    const insert = { text: `INSERT INTO app_order (id) VALUES ($1)`, values: [orderId] };
    const [, returned] = await run([insert, skiplock.enqueueStatement({ task: 'fulfil-order', payload: { orderId } })], true);
    const [job] = await jobsFor(orderId);
    expect(job).toMatchObject({ status: 'QUEUED' });
    // The statement returns the job's row, as enqueue's does.
    expect(String((returned![0] as { id: unknown }).id)).toBe(job!.id);
    // jobFromRow maps that raw row (snake_case, driver-typed) to the Job enqueue returns.
    expect(jobFromRow(returned![0] as Row)).toEqual(await skiplock.getJob(String(job!.id)));
    await skiplock.tick({ untilIdle: true, budgetMs: 20_000 });
    expect(await skiplock.getJob(String(job!.id))).toMatchObject({ status: 'DONE', result: { shipped: orderId } });
  });

  test('idempotency keys behave as at enqueue: one job, the replay returns the original', async () => {
    const orderId = `${slug}-keyed`;
    const key = `order-${orderId}`;
    const statement = () => skiplock.enqueueStatement({ task: 'fulfil-order', payload: { orderId }, idempotencyKey: key });
    type Returned = { id: unknown; inserted: unknown };
    const first = ((await run([statement()], true)) as Returned[][])[0]![0];
    const again = ((await run([statement()], true)) as Returned[][])[0]![0];
    expect(String(again!.id)).toBe(String(first!.id));
    expect([first!.inserted, again!.inserted].map((v) => v === true || v === 't')).toEqual([true, false]);
    const replay = await skiplock.enqueueWithResult({ task: 'fulfil-order', payload: { orderId }, idempotencyKey: key });
    expect(replay).toMatchObject({ created: false, job: { id: String(first!.id) } });
    expect(await jobsFor(orderId)).toHaveLength(1);
    // A key used in a transaction that rolled back is free again.
    const freeKey = `${key}-free`;
    await run([skiplock.enqueueStatement({ task: 'fulfil-order', payload: { orderId }, idempotencyKey: freeKey })], false).catch(() => undefined);
    expect((await skiplock.enqueueWithResult({ task: 'fulfil-order', payload: { orderId }, idempotencyKey: freeKey })).created).toBe(true);
  });
});

test('validated exactly like enqueue, before anything runs', () => {
  const refusals: [unknown, string][] = [
    [{ task: 'nope' }, 'unknown_task'],
    [{ task: 'fulfil-order', payload: { orderId: 1 } }, 'invalid_payload'],
    [{ task: 'fulfil-order', payload: { orderId: 'x' }, delayMs: -1 }, 'invalid_request'],
    [{ task: 'fulfil-order', payload: { orderId: 'x' }, runAt: new Date(), delayMs: 5 }, 'invalid_request'],
  ];
  for (const [input, code] of refusals) {
    let error: unknown;
    try {
      (skiplock as Skiplock).enqueueStatement(input as never);
    } catch (caught) {
      error = caught;
    }
    expect(error, JSON.stringify(input)).toBeInstanceOf(SkiplockError);
    expect((error as SkiplockError).code).toBe(code);
  }
});
