/**
 * The tick's commonest statement, stored in the database as a function (migration 026), for the
 * drivers that do not prepare statements: Neon's HTTP and WebSocket drivers, and `pg` behind a
 * pooler without prepared statements. PostgreSQL parses and plans every statement such a driver
 * sends; completeAndClaim's (a write of DONE results and the plain claim, about 4,500 characters
 * of CTEs over the queue and the record) cost it 2 ms of CPU more per call that way than prepared.
 * A PL/pgSQL function keeps its statements' plans per connection, as a prepared statement does,
 * so the call costs what the prepared statement costs (docs/benchmarks.md, "Issue 33").
 *
 * completeAndClaim stays the one place the statement is written: the function's body is its text
 * for that shape, verbatim, and test/store/stored-tick.test.ts fails when the two differ. A change
 * to that shape then needs a migration that creates the function again with the new text
 * (`storedTickMigration()` writes it), since a landed migration is never edited.
 */
import { statement, type Statement } from './sql.ts';

/** The function, and the types of its parameters: completeAndClaim's values for that shape, in order. */
export const STORED_TICK = {
  name: 'skiplock.tick_done_claim',
  parameters: ['timestamptz', 'text', 'bigint[]', 'int', 'int', 'int', 'int', 'text[]', 'text[]', 'int[]', 'text[]', 'jsonb[]', 'jsonb[]', 'text[]'],
} as const;

/** The statement with its stored form: a call of the function with the same values. */
export function withStoredForm(s: Statement): Statement {
  if (s.values.length !== STORED_TICK.parameters.length) throw new Error(`the stored tick takes ${STORED_TICK.parameters.length} values, not ${s.values.length}`);
  const args = s.values.map((_, i) => `$${i + 1}`).join(', ');
  return { ...s, stored: statement(`SELECT * FROM ${STORED_TICK.name}(${args})`, s.values) };
}

/** The function's body for a statement's text: what PostgreSQL keeps in pg_proc.prosrc. */
export const storedTickBody = (text: string) => `\nBEGIN\n  RETURN QUERY ${text};\nEND\n`;

/**
 * A migration's text that (re)creates the function for completeAndClaim's current text of the
 * shape (`text`), answering rows of `answerType` (a composite type the migration creates first).
 */
export function storedTickMigration(text: string, answerType: string): string {
  return `CREATE OR REPLACE FUNCTION ${STORED_TICK.name}(${STORED_TICK.parameters.join(', ')}) RETURNS SETOF ${answerType}
  LANGUAGE plpgsql VOLATILE
AS $tick$${storedTickBody(text)}$tick$;
`;
}
