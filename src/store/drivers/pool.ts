import type { Row, Sql, Statement } from '../sql.ts';

/**
 * What skiplock uses of a `pg` Pool — also what @neondatabase/serverless's Pool offers. Declared
 * here, so that neither the Neon driver nor these types load `pg` or @types/pg.
 */
export interface PgPoolLike {
  query(text: string, values?: unknown[]): Promise<{ rows: unknown[] }>;
  connect(): Promise<PgClientLike>;
  end(): Promise<void>;
}

export interface PgClientLike {
  query(text: string, values?: unknown[]): Promise<{ rows: unknown[] }>;
  release(error?: Error | boolean): void;
}

/** The Sql port over a pg-compatible pool; `close()` ends the pool when `owned`. */
export function createPoolDriver(pool: PgPoolLike, owned: boolean): Sql {
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
        for (const s of statements) results.push((await client.query(s.text, s.values as unknown[])).rows as Row[]);
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
