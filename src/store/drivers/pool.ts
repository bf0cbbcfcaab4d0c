import { sqlState, type Row, type Sql, type Statement } from '../sql.ts';

/**
 * What skiplock uses of a `pg` Pool — also what @neondatabase/serverless's Pool offers. Declared
 * here, so that neither the Neon driver nor these types load `pg` or @types/pg.
 */
export interface PgPoolLike {
  query(config: PgQueryConfig): Promise<{ rows: unknown[] }>;
  query(text: string, values?: unknown[]): Promise<{ rows: unknown[] }>;
  connect(): Promise<PgClientLike>;
  end(): Promise<void>;
}

export interface PgClientLike {
  query(text: string, values?: unknown[]): Promise<{ rows: unknown[] }>;
  release(error?: Error | boolean): void;
}

/** pg's QueryConfig: with a `name`, each connection prepares the text once and then only binds. */
export interface PgQueryConfig {
  name?: string;
  text: string;
  values?: unknown[];
}

export interface PoolDriverOptions {
  /**
   * Send hot statements (Statement.prepare) as named, prepared statements. Default true for `pg`.
   * Turn it off behind a pooler in transaction mode that does not keep prepared statements
   * (PgBouncer before 1.21, or without max_prepared_statements).
   */
  preparedStatements?: boolean;
}

/**
 * Errors that say a prepared statement cannot be used, raised before the statement runs (so
 * sending it again unnamed is safe): a schema change altered its result columns (0A000, "cached
 * plan must not change result type", e.g. a migration while this process runs), or a pooler gave
 * the query a connection that does not hold it (26000) or holds another under the name (42P05).
 */
export function preparedStatementUnusable(error: unknown): boolean {
  const state = sqlState(error);
  if (state === '26000' || state === '42P05') return true;
  if (state !== '0A000' || !(error instanceof Error)) return false;
  // The server function that raised it names it in any language (lc_messages translates the message).
  return (error as { routine?: unknown }).routine === 'RevalidateCachedQuery' || /cached plan must not change result type/i.test(error.message);
}

/** A statement's name: one per text (a 52-bit FNV-1a hash), so that a connection never sees one name with two texts. */
const names = new Map<string, string>();
export function preparedName(text: string): string {
  let name = names.get(text);
  if (name === undefined) {
    let hash = 0xcbf29ce484222325n;
    for (let i = 0; i < text.length; i++) hash = BigInt.asUintN(64, (hash ^ BigInt(text.charCodeAt(i))) * 0x100000001b3n);
    name = `skiplock_${(hash & 0xfffffffffffffn).toString(36)}`;
    // Hot statements have a few texts each; a bound keeps a misuse (values in the text) from growing it.
    if (names.size >= 1000) names.clear();
    names.set(text, name);
  }
  return name;
}

/** The Sql port over a pg-compatible pool; `close()` ends the pool when `owned`. */
export function createPoolDriver(pool: PgPoolLike, owned: boolean, options: PoolDriverOptions = {}): Sql {
  let prepare = options.preparedStatements ?? true;
  return {
    async query<R extends Row>(s: Statement) {
      if (prepare && s.prepare) {
        try {
          return (await pool.query({ name: preparedName(s.text), text: s.text, values: s.values as unknown[] })).rows as R[];
        } catch (error) {
          if (!preparedStatementUnusable(error)) throw error;
          // Refused before it ran: send it again unnamed, and prepare nothing more in this process.
          prepare = false;
          console.warn(`[skiplock] prepared statements turned off for this pool: ${error instanceof Error ? error.message : String(error)}`);
        }
      }
      const sent = s.stored ?? s;
      const result = await pool.query(sent.text, sent.values as unknown[]);
      return result.rows as R[];
    },
    async batch(statements: readonly Statement[]) {
      const client = await pool.connect();
      let broken: unknown;
      try {
        await client.query('BEGIN');
        const results: Row[][] = [];
        for (const { text, values } of statements.map((s) => s.stored ?? s)) results.push((await client.query(text, values as unknown[])).rows as Row[]);
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
