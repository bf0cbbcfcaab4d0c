import { neon, neonConfig } from '@neondatabase/serverless';
import type { Row, Sql, Statement } from '../sql.ts';
import { checkConnectionString } from './database-url.ts';
import { explainProxyTokenError } from './local-proxy-token.ts';

export interface NeonHttpOptions {
  /** Overrides Neon's HTTPS endpoint, e.g. the local proxy's `http://127.0.0.1:PORT/sql`. */
  fetchEndpoint?: string;
}

/**
 * Neon's HTTP driver: one HTTPS request per statement or batch, no connection to hold. It cannot
 * prepare statements, so it sends a statement's stored form where there is one (Statement.stored).
 */
export function createNeonHttpDriver(connectionString: string, options: NeonHttpOptions = {}): Sql {
  checkConnectionString(connectionString, 'createNeonHttpDriver');
  // neon() reads fetchEndpoint from the global config; only the local stack sets it.
  if (options.fetchEndpoint) neonConfig.fetchEndpoint = options.fetchEndpoint;
  const sql = neon(connectionString);

  // A stale local proxy token (skiplock dev) becomes an error that names the fix: local-proxy-token.ts.
  const explained = (error: unknown) => {
    throw explainProxyTokenError(error);
  };
  return {
    async query<R extends Row>(s: Statement) {
      const { text, values } = s.stored ?? s;
      return (await sql.query(text, values as unknown[]).catch(explained)) as R[];
    },
    async batch(statements: readonly Statement[]) {
      const queries = statements.map((s) => s.stored ?? s).map(({ text, values }) => sql.query(text, values as unknown[]));
      return (await sql.transaction(queries).catch(explained)) as Row[][];
    },
    async close() {},
  };
}
