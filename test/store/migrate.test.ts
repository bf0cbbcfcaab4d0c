import { afterAll, beforeAll, expect, test } from 'vitest';
import { createPgDriver } from '../../src/store/drivers/pg.ts';
import { appliedMigrationsText, migrate, migrationGapNote, splitStatements } from '../../src/store/migrate.ts';
import { loadMigrations } from '../../src/store/migrations-fs.ts';
import { statement } from '../../src/store/sql.ts';
import { createTestDb, type TestDb } from '../support/db.ts';

let db: TestDb;
beforeAll(async () => (db = await createTestDb({ migrated: false })));
afterAll(() => db.drop());

test('five clients migrating at once apply each migration once', async () => {
  const migrations = await loadMigrations();
  expect(migrations.length).toBeGreaterThan(0);
  const clients = Array.from({ length: 5 }, () => createPgDriver(db.url, { max: 1 }));
  try {
    const results = await Promise.all(clients.map((sql) => migrate(sql, migrations)));
    for (const m of migrations) {
      expect(results.filter((r) => r.applied.includes(m.id))).toHaveLength(1);
      expect(results.filter((r) => r.alreadyApplied.includes(m.id))).toHaveLength(4);
    }
    const rows = await db.sql.query(statement(`SELECT id FROM skiplock.migration ORDER BY id`));
    expect(rows.map((r) => r.id)).toEqual(migrations.map((m) => m.id));
    // Running again is a no-op.
    expect((await migrate(db.sql, migrations)).applied).toEqual([]);
  } finally {
    await Promise.all(clients.map((c) => c.close()));
  }
});

test('a migration changed after it was applied is refused', async () => {
  const migrations = await loadMigrations();
  const changed = migrations.map((m, i) => (i === 0 ? { ...m, sql: `${m.sql}\n-- edited` } : m));
  await expect(migrate(db.sql, changed)).rejects.toThrow(/changed after it was applied/);
});

test('splitStatements keeps quoted and dollar-quoted semicolons', () => {
  const text = `-- a; comment
    CREATE TABLE a (x text DEFAULT ';');
    /* b; */ CREATE FUNCTION f() RETURNS int AS $body$ SELECT 1; $body$ LANGUAGE sql;
    SELECT "we;ird" FROM a`;
  expect(splitStatements(text)).toEqual([
    `CREATE TABLE a (x text DEFAULT ';')`,
    `CREATE FUNCTION f() RETURNS int AS $body$ SELECT 1; $body$ LANGUAGE sql`,
    `SELECT "we;ird" FROM a`,
  ]);
});

test('splitStatements: a dollar-quote tag may hold digits after its first character, as in PostgreSQL', () => {
  const text = `CREATE FUNCTION g() RETURNS int AS $body1$ SELECT 1; SELECT 2; $body1$ LANGUAGE sql; SELECT $1, 2`;
  expect(splitStatements(text)).toEqual([`CREATE FUNCTION g() RETURNS int AS $body1$ SELECT 1; SELECT 2; $body1$ LANGUAGE sql`, `SELECT $1, 2`]);
});

test('a migration that fails on duplicate data (a unique index) fails migrate, and is not recorded as applied', async () => {
  const migrations = await loadMigrations();
  await migrate(db.sql, migrations);
  const unique = {
    id: 9001,
    name: '9001_unique_on_duplicates.sql',
    sql: `CREATE TABLE skiplock.dup_test (x int);
          INSERT INTO skiplock.dup_test VALUES (1), (1);
          CREATE UNIQUE INDEX dup_test_x_idx ON skiplock.dup_test (x);`,
  };
  await expect(migrate(db.sql, [...migrations, unique])).rejects.toMatchObject({ code: '23505' });
  expect(await db.sql.query(statement(`SELECT id FROM skiplock.migration WHERE id = 9001`))).toEqual([]);
  expect(await db.sql.query(statement(`SELECT to_regclass('skiplock.dup_test') AS t`))).toEqual([{ t: null }]);
});

test('numbers may have gaps, and a lower number merged after a higher one was applied is still applied', async () => {
  const fresh = await createTestDb({ migrated: false });
  try {
    const m = (id: number) => ({ id, name: `${String(id).padStart(3, '0')}_t${id}.sql`, sql: `CREATE TABLE gap_${id} (x int)` });
    expect(await migrate(fresh.sql, [m(1), m(9)])).toEqual({ applied: [1, 9], alreadyApplied: [] });
    expect(await migrate(fresh.sql, [m(1), m(6), m(9)])).toEqual({ applied: [6], alreadyApplied: [1, 9] });
    const rows = await fresh.sql.query(statement(`SELECT id FROM skiplock.migration ORDER BY id`));
    expect(rows.map((r) => Number(r.id))).toEqual([1, 6, 9]);
  } finally {
    await fresh.drop();
  }
});

test('a number no migration has is explained where the applied ids are listed (issue 30: 6, 8 and no word about 7)', () => {
  expect(migrationGapNote([1, 2, 3])).toBeUndefined();
  expect(migrationGapNote([6, 8, 9])).toMatch(/^there is no migration 7: never used \(006 and 008 were written side by side .*\); the numbers need not be consecutive$/);
  expect(migrationGapNote([1, 4])).toBe('there is no migration 2: never used; there is no migration 3: never used; the numbers need not be consecutive');
  const shipped = [1, 2, 3, 4, 5, 6, 8, 9, 10];
  expect(appliedMigrationsText([1, 2, 3, 4, 5, 6, 8, 9, 10], shipped)).toMatch(/^1, 2, 3, 4, 5, 6, 8, 9, 10 \(there is no migration 7: never used/);
  expect(appliedMigrationsText([9, 10], shipped)).toBe('9, 10');
  expect(appliedMigrationsText([], shipped)).toBe('');
});
