import pg from 'pg';
import type { Sql } from '../sql.ts';
import { checkConnectionString, pgUrlOptions } from './database-url.ts';
import { createPoolDriver, type PgPoolLike } from './pool.ts';

/**
 * Pool options (pg's PoolConfig: max, idleTimeoutMillis, ssl, …), declared without @types/pg so
 * that a consumer's type check does not need it.
 */
export interface PgPoolOptions {
  max?: number;
  /**
   * Keep the hot statements (the claim, heartbeats, enqueues, step writes) prepared per
   * connection: PostgreSQL parses and plans each once instead of on every call. Default true. Set
   * false behind a pooler in transaction mode that does not keep prepared statements (PgBouncer
   * before 1.21, or without max_prepared_statements); either way, a statement refused as
   * unprepared is sent again unnamed and preparing stops (with one warning).
   */
  preparedStatements?: boolean;
  [option: string]: unknown;
}

/**
 * A `pg` Pool, or a connection string to create one (closed by `close()`). A string's libpq-style
 * `sslmode=require` and `channel_binding=require` (Neon's) are read as database-url.ts says.
 */
export function createPgDriver(poolOrUrl: PgPoolLike | string, options: PgPoolOptions = {}): Sql {
  const { preparedStatements, ...poolOptions } = options;
  if (typeof poolOrUrl === 'object' && poolOrUrl !== null) return createPoolDriver(poolOrUrl, false, { preparedStatements });
  checkConnectionString(poolOrUrl, 'createPgDriver');
  const pool = new pg.Pool({ ...pgUrlOptions(poolOrUrl), ...poolOptions });
  // An idle client dropped by the server must not crash the process; the next query reconnects.
  pool.on('error', () => {});
  return createPoolDriver(pool as unknown as PgPoolLike, true, { preparedStatements });
}
