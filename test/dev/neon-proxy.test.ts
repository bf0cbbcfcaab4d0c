/**
 * src/dev/neon-proxy.ts against the REAL @neondatabase/serverless driver: its HTTP `neon()` function
 * and its WebSocket `Pool`, on the suite's shared PostgreSQL (test/support/global-setup.ts).
 */
import { neon, neonConfig, Pool, type NeonQueryFunction } from '@neondatabase/serverless';
import { request } from 'node:http';
import ws from 'ws';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { freePort } from '../../src/dev/embedded-postgres.ts';
import { startNeonProxy, type NeonProxy } from '../../src/dev/neon-proxy.ts';
import { statement } from '../../src/store/sql.ts';
import { createTestDb, type TestDb } from '../support/db.ts';

let db: TestDb;
let proxy: NeonProxy;
let sql: NeonQueryFunction<false, false>;

/** Points the driver's global config at `p`; returns a function restoring the previous settings. */
function useProxy(p: NeonProxy): () => void {
  const previous = { fetchEndpoint: neonConfig.fetchEndpoint, wsProxy: neonConfig.wsProxy };
  neonConfig.fetchEndpoint = p.fetchEndpoint;
  neonConfig.wsProxy = p.wsProxy;
  return () => {
    neonConfig.fetchEndpoint = previous.fetchEndpoint;
    neonConfig.wsProxy = previous.wsProxy;
  };
}

beforeAll(async () => {
  db = await createTestDb({ migrated: false });
  proxy = await startNeonProxy();
  // neonConfig is global to the driver: set once here (only the close() test swaps it briefly).
  useProxy(proxy);
  neonConfig.useSecureWebSocket = false;
  neonConfig.pipelineTLS = false;
  neonConfig.pipelineConnect = false;
  neonConfig.webSocketConstructor = ws;
  sql = neon(db.url);
});

afterAll(async () => {
  await proxy?.close();
  await db?.drop();
});

async function expectReject(promise: Promise<unknown>): Promise<Error & Record<string, unknown>> {
  try {
    await promise;
  } catch (err) {
    expect(err).toBeInstanceOf(Error);
    return err as Error & Record<string, unknown>;
  }
  throw new Error('expected a rejection');
}

test('HTTP neon(): params and types (int8, timestamptz, jsonb, text[], bool, null)', async () => {
  const when = new Date('2024-05-06T07:08:09.123Z');
  const rows = await sql`
    SELECT ${9007199254740993n}::int8 AS big, ${when}::timestamptz AS at, ${{ a: [1, 'x'] }}::jsonb AS doc,
           ${['a', 'b,c', null]}::text[] AS tags, ${true}::bool AS flag, ${null}::text AS nothing`;
  expect(rows).toStrictEqual([{
    big: '9007199254740993', at: when, doc: { a: [1, 'x'] }, tags: ['a', 'b,c', null], flag: true, nothing: null,
  }]);
});

test('HTTP sql.query(): arrayMode + fullResults (fields, command, rowCount)', async () => {
  const r = await sql.query('SELECT n, n * 2 AS twice FROM generate_series(1, $1::int) n', [3], { arrayMode: true, fullResults: true });
  expect(r.command).toBe('SELECT');
  expect(r.rowCount).toBe(3);
  expect(r.fields.map((f) => [f.name, f.dataTypeID])).toStrictEqual([['n', 23], ['twice', 23]]);
  expect(r.rows).toStrictEqual([[1, 2], [2, 4], [3, 6]]);
});

test('HTTP sql.transaction(): queries run in one transaction, results in order', async () => {
  await sql`CREATE TABLE tx_order (id int PRIMARY KEY, note text)`;
  const [ins, sel, xid] = await sql.transaction((tx) => [
    tx`INSERT INTO tx_order VALUES (1, 'one'), (2, 'two') RETURNING id, pg_current_xact_id()::text AS xid`,
    tx`SELECT note FROM tx_order ORDER BY id`,
    tx`SELECT pg_current_xact_id()::text AS xid`,
  ]);
  expect(ins?.map((r) => r.id)).toStrictEqual([1, 2]);
  expect(sel).toStrictEqual([{ note: 'one' }, { note: 'two' }]);
  expect(xid?.[0]?.xid, 'all queries of a transaction share one xid').toBe(ins?.[0]?.xid);
  expect(typeof ins?.[0]?.xid).toBe('string');
});

test('HTTP sql.transaction(): isolationLevel / readOnly / deferrable headers are honoured', async () => {
  const [rows] = await sql.transaction([
    sql`SELECT current_setting('transaction_isolation') AS iso, current_setting('transaction_read_only') AS ro,
               current_setting('transaction_deferrable') AS def`,
  ], { isolationLevel: 'Serializable', readOnly: true, deferrable: true });
  expect(rows).toStrictEqual([{ iso: 'serializable', ro: 'on', def: 'on' }]);
});

test('HTTP sql.transaction(): a failing query rolls the whole batch back', async () => {
  await sql`CREATE TABLE tx_rollback (id int PRIMARY KEY, note text)`;
  const err = await expectReject(sql.transaction([sql`INSERT INTO tx_rollback VALUES (3, 'three')`, sql`SELECT 1/0`]));
  expect(err.code).toBe('22012');
  expect(await sql`SELECT count(*)::int AS n FROM tx_rollback WHERE id = 3`).toStrictEqual([{ n: 0 }]);
});

test('HTTP errors: unique violation has .code 23505 and .constraint; syntax error 42601', async () => {
  await sql`CREATE TABLE dup (id int PRIMARY KEY, note text)`;
  await sql`INSERT INTO dup VALUES (1, 'one')`;
  const err = await expectReject(sql`INSERT INTO dup VALUES (1, 'again')`);
  expect(err.name).toBe('NeonDbError');
  expect(err.code).toBe('23505');
  expect(err.constraint).toBe('dup_pkey');
  expect(err.table).toBe('dup');
  expect(err.message).toMatch(/duplicate key/);
  const syntax = await expectReject(sql.query('SELEKT 1'));
  expect(syntax.code).toBe('42601');
  expect(syntax.position).toBe('1');
  const multi = await expectReject(sql.query('SELECT 1; SELECT 2')); // one statement per query, as on Neon
  expect(multi.code).toBe('42601');
});

test('HTTP: a lone BEGIN does not leak an open transaction into the next request', async () => {
  await sql`BEGIN`;
  // Inside a leaked transaction both requests would report the same transaction id.
  const [a] = await sql`SELECT pg_current_xact_id()::text AS xid`;
  const [b] = await sql`SELECT pg_current_xact_id()::text AS xid`;
  expect(typeof a?.xid).toBe('string');
  expect(typeof b?.xid).toBe('string');
  expect(a?.xid).not.toBe(b?.xid);
});

test('HTTP: unreachable Postgres becomes a driver error (HTTP 503), not a hang', { timeout: 15_000 }, async () => {
  const unreachable = new URL(db.url);
  unreachable.port = String(await freePort()); // nothing listens there once freePort() resolves
  const err = await expectReject(neon(unreachable.toString())`SELECT 1`);
  expect(err.message).toMatch(/HTTP status 503.*Could not connect to Postgres/);
});

test('HTTP raw: without Neon-Array-Mode rows are objects of raw text; bad JSON 400, unknown path 404, GET 405, oversized body 413', async () => {
  const headers = { 'Neon-Connection-String': db.url };
  const raw = await fetch(proxy.fetchEndpoint, {
    method: 'POST', headers, body: JSON.stringify({ query: 'SELECT $1::int8 AS n, true AS b, NULL AS z', params: ['7'] }),
  });
  expect(raw.status).toBe(200);
  const rawBody = (await raw.json()) as { rows: unknown[]; rowAsArray: boolean; fields: { name: string }[] };
  expect([rawBody.rows, rawBody.rowAsArray]).toStrictEqual([[{ n: '7', b: 't', z: null }], false]);
  expect(Object.keys(rawBody.fields[0] ?? {}).sort())
    .toStrictEqual(['columnID', 'dataTypeID', 'dataTypeModifier', 'dataTypeSize', 'format', 'name', 'tableID']);

  const bad = await fetch(proxy.fetchEndpoint, { method: 'POST', headers, body: '{nope' });
  expect(bad.status).toBe(400);
  expect(((await bad.json()) as { message: string }).message).toMatch(/JSON/);
  const missing = await fetch(proxy.fetchEndpoint, { method: 'POST', headers, body: '{"nothing":1}' });
  expect(missing.status).toBe(400);
  await missing.body?.cancel();

  const notFound = await fetch(proxy.fetchEndpoint.replace(/\/sql$/, '/nope'));
  expect(notFound.status).toBe(404);
  await notFound.body?.cancel();
  const get = await fetch(proxy.fetchEndpoint);
  expect(get.status).toBe(405);
  await get.body?.cancel();

  const tooLarge = await fetch(proxy.fetchEndpoint, {
    method: 'POST', headers, body: JSON.stringify({ query: 'SELECT 1', params: ['x'.repeat(10 * 1024 * 1024)] }),
  });
  expect(tooLarge.status).toBe(413);
  expect(((await tooLarge.json()) as { message: string }).message).toMatch(/too large/);
});

test('WebSocket Pool: queries, a BEGIN/COMMIT transaction on a client, pool.end()', async () => {
  await sql`CREATE TABLE ws_tx (id int PRIMARY KEY, note text)`;
  const pool = new Pool({ connectionString: db.url, max: 3 });
  try {
    const { rows } = await pool.query('SELECT $1::int8 AS big, now() AS at, $2::jsonb AS doc', ['42', '{"k":true}']);
    expect(rows[0].big).toBe('42');
    expect(rows[0].at).toBeInstanceOf(Date);
    expect(rows[0].doc).toStrictEqual({ k: true });
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      await client.query('INSERT INTO ws_tx VALUES ($1, $2)', [10, 'ten']);
      await client.query('COMMIT');
      await client.query('BEGIN');
      await client.query('INSERT INTO ws_tx VALUES ($1, $2)', [11, 'eleven']);
      await client.query('ROLLBACK');
    } finally {
      client.release();
    }
    const parallel = await Promise.all([1, 2, 3, 4, 5].map((i) => pool.query('SELECT $1::int AS i', [i])));
    expect(parallel.map((r) => r.rows[0].i)).toStrictEqual([1, 2, 3, 4, 5]);
  } finally {
    await pool.end();
  }
  expect(await sql`SELECT id FROM ws_tx WHERE id >= 10`).toStrictEqual([{ id: 10 }]);
});

test('WebSocket: non-loopback address refused (403), bad path 404', async () => {
  const status = (path: string) => new Promise<number>((resolve, reject) => {
    const sock = new ws(`ws://127.0.0.1:${proxy.port}${path}`);
    sock.on('unexpected-response', (_req, res) => { resolve(res.statusCode ?? 0); sock.terminate(); });
    sock.on('open', () => { sock.close(); reject(new Error(`${path} was accepted`)); });
    sock.on('error', () => {});
  });
  const token = new URL(proxy.fetchEndpoint).pathname.replace(/\/sql$/, '');
  expect(await status(`${token}/v2?address=10.1.2.3:5432`)).toBe(403);
  expect(await status(`${token}/v2?address=example.com:5432`)).toBe(403);
  expect(await status(`${token}/v1?address=127.0.0.1:5432`)).toBe(404);
});

test('close(): returns promptly with an HTTP query and a WebSocket client in flight', async () => {
  // A proxy of its own, so closing it leaves the shared one to the other tests.
  const own = await startNeonProxy();
  const restore = useProxy(own);
  const pool = new Pool({ connectionString: db.url });
  pool.on('error', () => {});
  try {
    const client = await pool.connect();
    client.on('error', () => {});
    const wsSleep = client.query('SELECT pg_sleep(30)').catch((e: unknown) => e);
    const httpSleep = neon(db.url)`SELECT pg_sleep(30)`.catch((e: unknown) => e);
    // Both sleeps must have reached Postgres before the proxy closes.
    const sleeping = statement(`SELECT count(*)::int AS n FROM pg_stat_activity
      WHERE datname = current_database() AND state = 'active' AND query = 'SELECT pg_sleep(30)'`);
    await expect.poll(async () => (await db.sql.query(sleeping))[0]?.n, { timeout: 10_000 }).toBe(2);
    const started = Date.now();
    await own.close();
    const elapsed = Date.now() - started;
    // Generous: the point is that close() does not wait for the 30 s sleeps.
    expect(elapsed, `close() took ${elapsed} ms`).toBeLessThan(10_000);
    expect(await httpSleep).toBeInstanceOf(Error);
    expect(await wsSleep).toBeInstanceOf(Error);
    client.release(true);
  } finally {
    restore();
    await pool.end().catch(() => {});
    await own.close();
  }
});

describe('only the app that holds the token, on a loopback Host, from no foreign Origin', () => {
  const base = () => `http://127.0.0.1:${proxy.port}`;
  const tokenPath = () => new URL(proxy.fetchEndpoint).pathname.replace(/\/sql$/, '');
  const post = (url: string, headers: Record<string, string> = {}) => fetch(url, {
    method: 'POST', headers: { 'Neon-Connection-String': db.url, ...headers }, body: JSON.stringify({ query: 'SELECT 1 AS one', params: [] }),
  }).then(async (r) => { await r.body?.cancel(); return r.status; });
  /** The HTTP status of a WebSocket upgrade (101 when it opened). */
  const upgrade = (path: string, headers: Record<string, string> = {}) => new Promise<number>((resolve) => {
    const sock = new ws(`ws://127.0.0.1:${proxy.port}${path}`, { headers });
    sock.on('unexpected-response', (_req, res) => { resolve(res.statusCode ?? 0); sock.terminate(); });
    sock.on('open', () => { resolve(101); sock.close(); });
    sock.on('error', () => {});
  });
  const pgAddress = () => `address=127.0.0.1:${new URL(db.url).port}`;

  test('the endpoints carry a secret path segment', () => {
    expect(tokenPath()).toMatch(/^\/[A-Za-z0-9_-]{20,}$/);
    expect(proxy.wsProxy('127.0.0.1', 5432)).toBe(`127.0.0.1:${proxy.port}${tokenPath()}/v2?address=127.0.0.1:5432`);
  });

  test('/sql: the right token answers; a missing or wrong one is refused (403) before Postgres is reached', async () => {
    expect(await post(proxy.fetchEndpoint)).toBe(200);
    expect(await post(`${base()}/sql`)).toBe(403);
    expect(await post(`${base()}/${'x'.repeat(32)}/sql`)).toBe(403);
    expect(await post(`${base()}${tokenPath()}x/sql`)).toBe(403);
  });

  test('a stale token (an earlier run\'s, pasted into .dev.vars / .env.local): the real driver\'s error names the fix, not a secret', async () => {
    const stale = `${base()}/${'x'.repeat(32)}/sql`;
    const restore = () => (neonConfig.fetchEndpoint = proxy.fetchEndpoint);
    neonConfig.fetchEndpoint = stale;
    try {
      const error = await neon(db.url).query('SELECT 1').then(() => null, (e: unknown) => e as Error);
      expect(error?.message).toContain('HTTP status 403');
      expect(error?.message).toContain('Missing or wrong proxy token');
      expect(error?.message).toContain('npx skiplock dev');
      expect(error?.message).toContain('.dev.vars');
      expect(error?.message).toContain('.env.local');
      expect(error?.message).not.toContain(tokenPath().slice(1));
      expect(error?.message).not.toContain('x'.repeat(32));
    } finally {
      restore();
    }
  });

  test('a token given (kept by skiplock dev between runs) is the one the endpoints carry; a short one is refused', async () => {
    const token = 'kept-token-0123456789abcdef';
    const kept = await startNeonProxy({ token });
    try {
      expect(kept.fetchEndpoint).toBe(`http://127.0.0.1:${kept.port}/${token}/sql`);
      expect(kept.wsProxy('127.0.0.1', 5432)).toBe(`127.0.0.1:${kept.port}/${token}/v2?address=127.0.0.1:5432`);
      expect(await post(kept.fetchEndpoint)).toBe(200);
    } finally {
      await kept.close();
    }
    await expect(startNeonProxy({ token: 'short' })).rejects.toThrow(/token/);
  });

  test('WebSocket: the right token opens; a missing or wrong one is refused (403)', async () => {
    expect(await upgrade(`${tokenPath()}/v2?${pgAddress()}`)).toBe(101);
    expect(await upgrade(`/v2?${pgAddress()}`)).toBe(403);
    expect(await upgrade(`/${'x'.repeat(32)}/v2?${pgAddress()}`)).toBe(403);
  });

  test('a foreign Host (DNS rebinding) is refused (403), with the token too', async () => {
    // fetch() may not set Host (a forbidden header): node:http can.
    const postWithHost = (host: string) => new Promise<number>((resolve, reject) => {
      const body = JSON.stringify({ query: 'SELECT 1', params: [] });
      const req = request(proxy.fetchEndpoint, { method: 'POST', headers: { Host: host, 'Neon-Connection-String': db.url } }, (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      });
      req.on('error', reject);
      req.end(body);
    });
    expect(await postWithHost(`evil.example:${proxy.port}`)).toBe(403);
    expect(await postWithHost(`127.0.0.1.evil.example:${proxy.port}`)).toBe(403);
    expect(await upgrade(`${tokenPath()}/v2?${pgAddress()}`, { Host: `evil.example:${proxy.port}` })).toBe(403);
    expect(await postWithHost(`localhost:${proxy.port}`)).toBe(200);
  });

  test('a browser Origin that is not the app is refused (403); the app\'s own is served', async () => {
    const app = await startNeonProxy({ allowedOrigins: ['http://127.0.0.1:8787'] });
    try {
      const endpoint = app.fetchEndpoint;
      const path = new URL(endpoint).pathname.replace(/\/sql$/, '');
      expect(await post(endpoint, { Origin: 'https://evil.example' })).toBe(403);
      expect(await post(endpoint, { Origin: 'null' })).toBe(403);
      expect(await post(endpoint, { Origin: 'http://127.0.0.1:8787' })).toBe(200);
      const upgradeTo = (headers: Record<string, string>) => new Promise<number>((resolve) => {
        const sock = new ws(`ws://127.0.0.1:${app.port}${path}/v2?${pgAddress()}`, { headers });
        sock.on('unexpected-response', (_req, res) => { resolve(res.statusCode ?? 0); sock.terminate(); });
        sock.on('open', () => { resolve(101); sock.close(); });
        sock.on('error', () => {});
      });
      expect(await upgradeTo({ Origin: 'https://evil.example' })).toBe(403);
      expect(await upgradeTo({ Origin: 'http://127.0.0.1:8787' })).toBe(101);
    } finally {
      await app.close();
    }
    // With no allowed origin, any Origin at all is refused.
    expect(await post(proxy.fetchEndpoint, { Origin: `http://127.0.0.1:${proxy.port}` })).toBe(403);
  });
});
