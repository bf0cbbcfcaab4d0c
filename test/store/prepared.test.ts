/**
 * Prepared statements in the pg driver (issue 17): the hot statements (the claim, heartbeats,
 * enqueues, step writes) are sent named, so each connection parses and plans them once; a schema
 * change under a prepared statement, or a pooler that does not keep them, turns preparing off
 * without failing the statement that ran into it.
 */
import { afterAll, beforeAll, expect, test } from 'vitest';
import { createPgDriver } from '../../src/store/drivers/pg.ts';
import { preparedStatementUnusable } from '../../src/store/drivers/pool.ts';
import { completeAndClaim } from '../../src/store/claim.ts';
import { statement } from '../../src/store/sql.ts';
import { createTestDb, type TestDb } from '../support/db.ts';

let db: TestDb;
beforeAll(async () => {
  db = await createTestDb();
});
afterAll(() => db.drop());

const claim = () => completeAndClaim({ now: null, workerId: 'w', results: [], limit: 10, budgetMs: 60_000, leaseMs: 30_000, leaseGraceMs: 5_000, tasks: ['noop'] });
const preparedNames = (sql: ReturnType<typeof createPgDriver>) =>
  sql.query<{ name: string }>(statement(`SELECT name FROM pg_prepared_statements ORDER BY name`)).then((rows) => rows.map((r) => r.name));

test('the claim statement is prepared once per connection, under a name of its text', async () => {
  const sql = createPgDriver(db.url, { max: 1 });
  try {
    expect(claim().prepare).toBe(true);
    await sql.query(claim());
    await sql.query(claim());
    const names = await preparedNames(sql);
    expect(names).toHaveLength(1);
    expect(names[0]).toMatch(/^skiplock_[0-9a-z]+$/);
    // Another text (another claim shape) is another statement.
    await sql.query(completeAndClaim({ now: null, workerId: 'w', results: [], limit: 10, budgetMs: 60_000, leaseMs: 30_000, leaseGraceMs: 5_000, tasks: ['noop'], fanIn: true }));
    expect(await preparedNames(sql)).toHaveLength(2);
  } finally {
    await sql.close();
  }
});

test('preparedStatements: false sends every statement unnamed (for poolers that do not keep them)', async () => {
  const sql = createPgDriver(db.url, { max: 1, preparedStatements: false });
  try {
    await sql.query(claim());
    expect(await preparedNames(sql)).toEqual([]);
  } finally {
    await sql.close();
  }
});

test('a schema change under a prepared statement: that query still answers, and preparing is turned off', async () => {
  await db.sql.query(statement(`CREATE TABLE prep_t (a int)`));
  await db.sql.query(statement(`INSERT INTO prep_t VALUES (1)`));
  const warnings: unknown[] = [];
  const warn = console.warn;
  console.warn = (...args: unknown[]) => void warnings.push(args);
  const sql = createPgDriver(db.url, { max: 1 });
  try {
    const select = { ...statement(`SELECT * FROM prep_t`), prepare: true };
    expect(await sql.query(select)).toEqual([{ a: 1 }]);
    await sql.query(statement(`ALTER TABLE prep_t ADD COLUMN b int DEFAULT 2`));
    // PostgreSQL refuses the prepared plan ("cached plan must not change result type"): sent again unnamed.
    expect(await sql.query(select)).toEqual([{ a: 1, b: 2 }]);
    expect(await sql.query(select)).toEqual([{ a: 1, b: 2 }]);
    await sql.query(claim());
    // pg's pool closes a connection whose query failed: the new one holds nothing, and nothing was prepared since.
    expect(await preparedNames(sql)).toEqual([]);
    expect(warnings).toHaveLength(1);
  } finally {
    console.warn = warn;
    await sql.close();
  }
});

test('the schema-change refusal is recognised by the server function that raised it, not only by its English message', () => {
  const refusal = (message: string, routine?: string) => Object.assign(new Error(message), { code: '0A000', ...(routine && { routine }) });
  expect(preparedStatementUnusable(refusal('der gecachte Plan darf den Ergebnistyp nicht ändern', 'RevalidateCachedQuery'))).toBe(true);
  expect(preparedStatementUnusable(refusal('cached plan must not change result type'))).toBe(true);
  expect(preparedStatementUnusable(refusal('feature not supported', 'something_else'))).toBe(false);
});
