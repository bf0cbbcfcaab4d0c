import pg from 'pg';
import type { Row, Sql, Statement } from '../sql.ts';
import { pgUrlOptions } from './database-url.ts';

/**
 * A `pg` Pool, or a connection string to create one (closed by `close()`). A string's libpq-style
 * `sslmode=require` and `channel_binding=require` (Neon's) are read as database-url.ts says.
 */
export function createPgDriver(poolOrUrl: pg.Pool | string, options: pg.PoolConfig = {}): Sql {
  const owned = typeof poolOrUrl === 'string';
  const pool = owned ? new pg.Pool({ ...pgUrlOptions(poolOrUrl), ...options }) : poolOrUrl;
  // An idle client dropped by the server must not crash the process; the next query reconnects.
  if (owned) pool.on('error', () => {});

  return {
    async query<R extends Row>(s: Statement) {
      const result = await pool.query(s.text, s.values as unknown[]);
      return result.rows as R[];
    },
    async batch(statements: readonly Statement[]) {
      const client = await pool.connect();
      let broken: unknown;
      try {
        await client.query('BEGIN');
        const results: Row[][] = [];
        for (const s of statements) results.push((await client.query(s.text, s.values as unknown[])).rows);
        await client.query('COMMIT');
        return results;
      } catch (error) {
        await client.query('ROLLBACK').catch((rollbackError: unknown) => (broken = rollbackError));
        throw error;
      } finally {
        client.release(broken instanceof Error ? broken : undefined);
      }
    },
    async close() {
      if (owned) await pool.end();
    },
  };
}
