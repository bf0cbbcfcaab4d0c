/**
 * The Sql port: everything skiplock needs from a database driver.
 *
 * Each call is one round trip and holds no session state between calls, so the same port
 * works over Neon's HTTP endpoint, a WebSocket pool or a plain `pg` pool.
 */
export interface Statement {
  readonly text: string;
  readonly values: readonly unknown[];
  /**
   * A hot statement (the claim, heartbeats, enqueues, step writes): a driver that can keeps it
   * prepared per connection, so PostgreSQL parses and plans it once instead of on every call
   * (src/store/drivers/pool.ts). Its text must not embed values: one text, one prepared statement.
   */
  readonly prepare?: boolean;
  /**
   * The same statement as a call of a function that holds it in the database (src/store/stored-tick.ts):
   * what a driver that does not prepare statements sends instead, so that PostgreSQL does not
   * parse and plan the statement on every call. Same values, same answer.
   */
  readonly stored?: Statement;
}

export type Row = Record<string, unknown>;

export interface Sql {
  /** Runs one statement and returns its rows. */
  query<R extends Row = Row>(statement: Statement): Promise<R[]>;
  /** Runs several statements in one non-interactive transaction (all or nothing). */
  batch(statements: readonly Statement[]): Promise<Row[][]>;
  /** Releases connections, if the driver holds any. */
  close(): Promise<void>;
}

/** Builds a statement; the tag keeps SQL builders short and greppable. */
export function statement(text: string, values: readonly unknown[] = []): Statement {
  return { text, values };
}

/** A hot statement, prepared by drivers that can (Statement.prepare). */
export function preparedStatement(text: string, values: readonly unknown[] = []): Statement {
  return { text, values, prepare: true };
}

/** The SQLSTATE of a driver error, if it carries one (pg and Neon both set `.code`). */
export function sqlState(error: unknown): string | undefined {
  if (typeof error === 'object' && error !== null && 'code' in error) {
    const code = (error as { code: unknown }).code;
    if (typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code)) return code;
  }
  return undefined;
}

/**
 * Sends `statements` as one transaction, again (up to three times) when PostgreSQL aborted it as
 * a deadlock (40P01), having written nothing. Two writes that lock a parent job and its child,
 * or a job and its steps, in opposite orders meet this way: a cancel, a restart or a send's
 * cancelOn locks a parent before its children (and a job before its steps); a child's result
 * write locks the child before its parent; a send's wake and a callback's completion lock a step
 * before its job. Whichever PostgreSQL aborts is sent again here (or, for a result write, by the
 * tick's next write).
 */
export async function batchDeadlockSafe(sql: Sql, statements: Statement[]): Promise<Row[][]> {
  for (let tries = 1; ; tries++) {
    try {
      return await sql.batch(statements);
    } catch (error) {
      if (sqlState(error) !== '40P01' || tries === 3) throw error;
    }
  }
}

/** Node's socket errors that mean the database could not be reached or the connection dropped. */
const SOCKET_ERRORS = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH', 'ENETUNREACH', 'EAI_AGAIN', 'ENOTFOUND']);

/**
 * Whether a driver error means the connection was lost or refused (the database restarting, a
 * network cut), not that the database refused the statement: SQLSTATE class 08 (connection
 * exception) or 57P01–57P03 (shutdown, starting up), a socket error, pg's "Connection terminated"
 * or its connect timeout, a fetch that failed (Neon over HTTP).
 */
export function isConnectionLost(error: unknown): boolean {
  const code = sqlState(error);
  if (code !== undefined) return code.startsWith('08') || /^57P0[123]$/.test(code);
  const errno = typeof error === 'object' && error !== null ? (error as { code?: unknown }).code : undefined;
  if (typeof errno === 'string' && SOCKET_ERRORS.has(errno)) return true;
  const message = error instanceof Error ? error.message : '';
  if (/Connection terminated|timeout exceeded when trying to connect|fetch failed/i.test(message)) return true;
  // Node reports a refused dual-stack "localhost" as an AggregateError of socket errors.
  return error instanceof AggregateError && error.errors.some(isConnectionLost);
}
