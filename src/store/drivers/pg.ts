import pg from 'pg';
import type { Sql } from '../sql.ts';
import { pgUrlOptions } from './database-url.ts';
import { createPoolDriver, type PgPoolLike } from './pool.ts';

/**
 * Pool options (pg's PoolConfig: max, idleTimeoutMillis, ssl, …), declared without @types/pg so
 * that a consumer's type check does not need it.
 */
export interface PgPoolOptions {
  max?: number;
  [option: string]: unknown;
}

/**
 * A `pg` Pool, or a connection string to create one (closed by `close()`). A string's libpq-style
 * `sslmode=require` and `channel_binding=require` (Neon's) are read as database-url.ts says.
 */
export function createPgDriver(poolOrUrl: PgPoolLike | string, options: PgPoolOptions = {}): Sql {
  if (typeof poolOrUrl !== 'string') return createPoolDriver(poolOrUrl, false);
  const pool = new pg.Pool({ ...pgUrlOptions(poolOrUrl), ...options });
  // An idle client dropped by the server must not crash the process; the next query reconnects.
  pool.on('error', () => {});
  return createPoolDriver(pool as unknown as PgPoolLike, true);
}
