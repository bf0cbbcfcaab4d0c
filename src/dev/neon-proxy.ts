/**
 * A local stand-in for Neon's serverless endpoints, so that the real `@neondatabase/serverless`
 * driver can talk to a plain local PostgreSQL (dev and tests only):
 *  - `POST /sql`: Neon's HTTP query protocol, used by `neon()` (set `neonConfig.fetchEndpoint`);
 *  - `/v2?address=host:port`: a WebSocket→TCP bridge, used by its `Pool`/`Client` (`neonConfig.wsProxy`).
 *
 * Wire protocol as read from @neondatabase/serverless 1.2.0: the driver always sends
 * `Neon-Raw-Text-Output: true` and `Neon-Array-Mode: true` and expects every row as an array of
 * Postgres text values (or null), whatever `arrayMode` the caller chose — it builds objects and
 * parses types itself from `fields[].dataTypeID`. An HTTP 400 body is copied field by field onto
 * the thrown error (`code`, `constraint`, ...); any other non-2xx status becomes
 * "Server error (HTTP status N): <body text>".
 *
 * Anything on this machine can reach a local port, web pages included, so both endpoints are
 * under a random secret path segment (`/<token>/sql`, `/<token>/v2`) that only the app is given
 * (the driver takes it as part of fetchEndpoint and of wsProxy's address); the Host must be a
 * loopback name (a DNS-rebinding page sends its own), and a request with an Origin (a browser's)
 * is refused unless that Origin is listed in `allowedOrigins`.
 */
import { randomBytes, timingSafeEqual } from 'node:crypto';
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import pg from 'pg';
import { pgUrlOptions } from '../store/drivers/database-url.ts';
import { PROXY_TOKEN, WRONG_PROXY_TOKEN_MESSAGE } from '../store/drivers/local-proxy-token.ts';
import { closeBridges, createWebSocketBridges, upgradeToBridge } from './neon-proxy-websocket.ts';

export interface NeonProxyOptions {
  /** Port to listen on (0 = pick a free port). Default 0. */
  port?: number;
  /** Host to bind. Default '127.0.0.1'. */
  host?: string;
  /** Max pooled pg connections per distinct connection string for HTTP /sql. Default 10. */
  maxConnections?: number;
  /** Browser origins allowed to call the proxy, e.g. the app's own `http://127.0.0.1:8787`. Default none. */
  allowedOrigins?: readonly string[];
  /**
   * For benchmarks: every HTTP /sql request is answered this many milliseconds later than the
   * database answers it, as if Neon were a network round trip away (`npm run bench`'s Neon
   * round-trip table). Default 0.
   */
  roundTripMs?: number;
  /**
   * The secret path segment (16+ characters of A–Z, a–z, 0–9, `_`, `-`), so that the endpoints an
   * app was given stay valid across restarts (`skiplock dev` keeps it in .skiplock/). Default: a new random one.
   */
  token?: string;
}

export interface NeonProxy {
  port: number;
  /** URL for neonConfig.fetchEndpoint, e.g. http://127.0.0.1:PORT/<token>/sql: a secret, like a password. */
  fetchEndpoint: string;
  /** value for neonConfig.wsProxy: (host, port) => string (the address carries the token too) */
  wsProxy: (host: string, port: number | string) => string;
  /** HTTP /sql requests served so far: each is one statement (or one batch) a Worker sent. */
  sqlRequests(): number;
  close(): Promise<void>;
}

interface SqlQuery {
  query: string;
  params: unknown[];
}

interface SqlResult { command: string; rowCount: number | null; fields: pg.FieldDef[]; rows: unknown[]; rowAsArray: boolean }

/** Thrown for a request we refuse before touching Postgres; becomes a JSON error response. */
class RequestError extends Error {
  status: number;
  constructor(status: number, message: string) {
    super(message);
    this.status = status;
  }
}

// Every column comes back as the raw text Postgres sent; the driver parses it on its side.
const RAW_TEXT: pg.CustomTypesConfig = {
  getTypeParser: (() => (value: string) => value) as unknown as pg.CustomTypesConfig['getTypeParser'],
};
// The fields the driver copies from a 400 body onto its NeonDbError (its `er` list).
const ERROR_FIELDS = ['severity', 'code', 'detail', 'hint', 'position', 'internalPosition', 'internalQuery',
  'where', 'schema', 'table', 'column', 'dataType', 'constraint', 'file', 'line', 'routine'] as const;
const ISOLATION = new Map([['ReadUncommitted', 'READ UNCOMMITTED'], ['ReadCommitted', 'READ COMMITTED'],
  ['RepeatableRead', 'REPEATABLE READ'], ['Serializable', 'SERIALIZABLE']]);
const LOOPBACK_HOST_HEADER = /^(?:127\.0\.0\.1|localhost|\[::1\])(?::\d+)?$/i;
const MAX_BODY = 10 * 1024 * 1024;

export async function startNeonProxy(options: NeonProxyOptions = {}): Promise<NeonProxy> {
  if (options.token !== undefined && !PROXY_TOKEN.test(options.token)) throw new Error('the proxy token must be 16+ characters of A-Z, a-z, 0-9, _ and -');
  const token = options.token ?? randomBytes(24).toString('base64url');
  const access: Access = { token, allowedOrigins: new Set(options.allowedOrigins ?? []) };
  const state = { closing: false, sqlRequests: 0 };
  const pools = createSqlPools(options.maxConnections ?? 10);
  const sql: SqlContext = { pools, closing: () => state.closing, roundTripMs: options.roundTripMs };
  const bridges = createWebSocketBridges();

  const server = http.createServer((req, res) => {
    const allowed = authorize(req, access);
    const handled = 'status' in allowed ? Promise.reject(new RequestError(allowed.status, allowed.message))
      : allowed.route === '/sql' ? ((state.sqlRequests += 1), handleSql(req, res, sql)) : Promise.reject(new RequestError(404, `No route for ${allowed.route}`));
    handled.catch((err: unknown) => {
      if (res.headersSent) return res.destroy();
      if (err instanceof RequestError) return send(res, err.status, { message: err.message });
      send(res, 500, { message: describe(err) });
    });
  });
  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    socket.on('error', () => {});
    const allowed = authorize(req, access);
    const refusal = state.closing ? '503 Service Unavailable' : 'status' in allowed ? '403 Forbidden' : allowed.route !== '/v2' ? '404 Not Found' : undefined;
    upgradeToBridge(bridges, req, socket, head, refusal);
  });

  const host = options.host ?? '127.0.0.1';
  const port = await listen(server, options.port ?? 0, host);
  const hostForUrl = host.includes(':') ? `[${host}]` : host;
  return {
    port,
    fetchEndpoint: `http://${hostForUrl}:${port}/${token}/sql`,
    sqlRequests: () => state.sqlRequests,
    wsProxy: (pgHost, pgPort) => `${hostForUrl}:${port}/${token}/v2?address=${pgHost}:${pgPort}`,
    async close() {
      state.closing = true;
      closeBridges(bridges);
      await pools.close();
      bridges.wss.close();
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections(); // keep-alive fetch connections would otherwise hold close()
      });
    },
  };
}

/** Who may use the proxy: requests under the secret path segment, from a loopback Host and an allowed Origin (or none). */
interface Access {
  token: string;
  allowedOrigins: ReadonlySet<string>;
}

/** The route under the token, or a refusal: a foreign Host or Origin, a missing or wrong token. */
function authorize(req: IncomingMessage, { token, allowedOrigins }: Access): { route: string } | { status: 403; message: string } {
  if (!LOOPBACK_HOST_HEADER.test(req.headers.host ?? '')) return { status: 403, message: 'Host must be 127.0.0.1, localhost or [::1]' };
  const origin = req.headers.origin;
  if (origin !== undefined && !allowedOrigins.has(origin)) return { status: 403, message: `Origin ${origin} is not allowed` };
  const path = new URL(req.url ?? '/', 'http://localhost').pathname;
  const [, first = '', ...rest] = path.split('/');
  if (!sameSecret(first, token)) return { status: 403, message: WRONG_PROXY_TOKEN_MESSAGE };
  return { route: `/${rest.join('/')}` };
}

async function listen(server: http.Server, port: number, host: string): Promise<number> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  return (server.address() as AddressInfo).port;
}

/** The pg pools of HTTP /sql, one per connection string, and the connections checked out of them. */
interface SqlPools {
  poolFor(connectionString: string): pg.Pool;
  /** Connections running a request's statements now. */
  busy: Set<pg.PoolClient>;
  close(): Promise<void>;
}

function createSqlPools(maxConnections: number): SqlPools {
  const pools = new Map<string, pg.Pool>();
  const busy = new Set<pg.PoolClient>();
  return {
    busy,
    poolFor(connectionString) {
      let pool = pools.get(connectionString);
      if (!pool) {
        pool = new pg.Pool({ ...pgUrlOptions(connectionString), max: maxConnections });
        // A connection dropped by the server must not crash the process: the pool replaces idle
        // clients ('error' on the pool), and a checked-out one fails its query or is discarded on release.
        pool.on('error', () => {});
        pool.on('connect', (client) => client.on('error', () => {}));
        pools.set(connectionString, pool);
      }
      return pool;
    },
    async close() {
      // pool.end() waits for checked-out clients; ending them makes in-flight queries fail fast.
      for (const client of busy) (client as pg.PoolClient & pg.Client).end().catch(() => {});
      await Promise.all([...pools.values()].map((pool) => pool.end().catch(() => {})));
      pools.clear();
    },
  };
}

/** What an HTTP /sql request is served with. */
interface SqlContext {
  pools: SqlPools;
  closing: () => boolean;
  roundTripMs: number | undefined;
}

/** POST /sql: one statement, or a batch (`{queries}`) in one transaction, on a pooled connection. */
async function handleSql(req: IncomingMessage, res: ServerResponse, { pools, closing, roundTripMs }: SqlContext): Promise<void> {
  if (req.method !== 'POST') throw new RequestError(405, 'Use POST /sql');
  if (closing()) throw new RequestError(503, 'neon-proxy is shutting down');
  const connectionString = req.headers['neon-connection-string'];
  if (typeof connectionString !== 'string') throw new RequestError(400, 'Missing Neon-Connection-String header');
  const arrayMode = req.headers['neon-array-mode'] === 'true';
  const body = parseBody(await readBody(req));
  if (roundTripMs) await new Promise((resolve) => setTimeout(resolve, roundTripMs));
  const begin = Array.isArray(body) ? beginStatement(req) : 'BEGIN';

  let client: pg.PoolClient;
  try {
    client = await pools.poolFor(connectionString).connect();
  } catch (err) {
    throw new RequestError(503, `Could not connect to Postgres: ${describe(err)}`);
  }
  pools.busy.add(client);
  let broken: Error | undefined;
  try {
    if (!Array.isArray(body)) {
      const result = await runQuery(client, body, arrayMode);
      // A lone BEGIN would leave this pooled connection mid-transaction: don't reuse it.
      if (result.command === 'BEGIN') broken = new Error('stray BEGIN');
      return send(res, 200, result);
    }
    await client.query(begin);
    try {
      const results: SqlResult[] = [];
      for (const q of body) results.push(await runQuery(client, q, arrayMode));
      await client.query('COMMIT');
      send(res, 200, { results });
    } catch (err) {
      await client.query('ROLLBACK').catch(() => { broken = new Error('ROLLBACK failed'); });
      throw err;
    }
  } catch (err) {
    if (err instanceof pg.DatabaseError) return send(res, 400, errorBody(err));
    broken = err instanceof Error ? err : new Error(String(err)); // connection lost mid-query
    send(res, 500, { message: `Postgres connection error: ${describe(err)}` });
  } finally {
    pools.busy.delete(client);
    client.release(broken);
  }
}

async function runQuery(client: pg.PoolClient, q: SqlQuery, arrayMode: boolean): Promise<SqlResult> {
  // `queryMode: 'extended'` (not in @types/pg) forces one statement per query, as on Neon, and
  // keeps the result a single QueryResult even without params.
  const config: pg.QueryConfig & { queryMode: 'extended'; rowMode?: 'array' } = {
    text: q.query, values: q.params, types: RAW_TEXT, queryMode: 'extended',
    ...(arrayMode ? { rowMode: 'array' as const } : {}),
  };
  const r = await client.query(config);
  const fields = r.fields.map(({ name, tableID, columnID, dataTypeID, dataTypeSize, dataTypeModifier, format }) =>
    ({ name, tableID, columnID, dataTypeID, dataTypeSize, dataTypeModifier, format }));
  return { command: r.command, rowCount: r.rowCount, fields, rows: r.rows, rowAsArray: arrayMode };
}

function parseBody(text: string): SqlQuery | SqlQuery[] {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    throw new RequestError(400, 'Request body is not valid JSON');
  }
  if (isObject(body) && Array.isArray(body.queries)) return body.queries.map(parseQuery);
  return parseQuery(body);
}

function parseQuery(value: unknown): SqlQuery {
  if (!isObject(value) || typeof value.query !== 'string') throw new RequestError(400, 'Expected {query, params} or {queries: [...]}');
  if (value.params !== undefined && !Array.isArray(value.params)) throw new RequestError(400, 'params must be an array');
  // The driver has already serialized params (strings, null, "\x…" bytea); pass them as they are.
  return { query: value.query, params: (value.params as unknown[] | undefined) ?? [] };
}

/** The driver sends its transaction() options as headers; apply them to the batch's BEGIN. */
function beginStatement(req: IncomingMessage): string {
  const { 'neon-batch-isolation-level': iso, 'neon-batch-read-only': ro, 'neon-batch-deferrable': def } = req.headers;
  let sql = 'BEGIN';
  if (iso !== undefined) {
    const level = typeof iso === 'string' ? ISOLATION.get(iso) : undefined;
    if (!level) throw new RequestError(400, `Unknown Neon-Batch-Isolation-Level: ${String(iso)}`);
    sql += ` ISOLATION LEVEL ${level}`;
  }
  if (ro !== undefined) sql += ro === 'true' ? ' READ ONLY' : ' READ WRITE';
  if (def !== undefined) sql += def === 'true' ? ' DEFERRABLE' : ' NOT DEFERRABLE';
  return sql;
}

function errorBody(err: pg.DatabaseError): Record<string, unknown> {
  const body: Record<string, unknown> = { message: err.message };
  for (const key of ERROR_FIELDS) if (err[key] !== undefined) body[key] = err[key];
  return body;
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_BODY) reject(new RequestError(413, 'Request body too large'));
      else chunks.push(chunk);
    });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

function sameSecret(given: string, expected: string): boolean {
  const a = Buffer.from(given);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}

function send(res: ServerResponse, status: number, body: object): void {
  res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null;
}

function describe(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  // Node reports ECONNREFUSED on a dual-stack "localhost" as an AggregateError with an empty message.
  const code = (err as NodeJS.ErrnoException).code;
  return err.message || code || err.name;
}
