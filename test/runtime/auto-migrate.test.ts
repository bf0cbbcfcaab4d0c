/**
 * autoMigrate: the packaged migrations (skiplock/migrations, as data) applied before an
 * instance's first statement — once per instance, safe when many cold instances start together
 * on an empty database, and retried after a failure.
 */
import { afterAll, beforeAll, expect, test } from 'vitest';
import { createSkiplock } from '../../src/index.ts';
import { migrations } from '../../src/migrations.ts';
import { createPgDriver } from '../../src/pg.ts';
import { loadMigrations } from '../../src/store/migrations-fs.ts';
import { MIGRATION_IDS, SCHEMA_VERSION } from '../../src/store/schema-version.ts';
import type { Sql } from '../../src/store/sql.ts';
import { exampleTasks } from '../../src/tasks/examples.ts';
import { createTestDb, type TestDb } from '../support/db.ts';

let db: TestDb;
beforeAll(async () => (db = await createTestDb({ migrated: false })));
afterAll(() => db?.drop());

test('the migrations as data are the files of migrations/', async () => {
  expect(migrations, 'src/store/migrations-data.ts is stale: npm run migrations:data').toEqual(await loadMigrations());
  // The schema check's ids (src/store/schema-version.ts) come from the same files.
  expect(MIGRATION_IDS, 'src/store/schema-version.ts is stale: npm run migrations:data').toEqual(migrations.map((m) => m.id));
  expect(SCHEMA_VERSION).toBe(migrations.at(-1)!.id);
});

test('eight cold instances enqueue at once on an empty database: the schema is created once, every enqueue succeeds', async () => {
  const drivers = Array.from({ length: 8 }, () => createPgDriver(db.url, { max: 2 }));
  let statements = 0;
  const counted = (sql: Sql): Sql => ({ ...sql, query: (s) => (statements++, sql.query(s)), batch: (s) => (statements++, sql.batch(s)) });
  try {
    const instances = drivers.map((sql) => createSkiplock({ sql: counted(sql), tasks: exampleTasks, autoMigrate: migrations }));
    const jobs = await Promise.all(instances.map((s, i) => s.enqueue({ task: 'echo', payload: { message: `cold ${i}` } })));
    expect(new Set(jobs.map((j) => j.id)).size).toBe(8);
    const applied = await db.sql.query({ text: `SELECT id FROM skiplock.migration ORDER BY id`, values: [] });
    expect(applied.map((r) => Number(r.id))).toEqual(migrations.map((m) => m.id));
    // Later statements of an instance do not migrate again.
    const before = statements;
    await instances[0]!.enqueue({ task: 'echo', payload: { message: 'warm' } });
    expect(statements - before).toBe(1);
  } finally {
    await Promise.all(drivers.map((sql) => sql.close()));
  }
});

test('a failed migration is retried by the next statement', async () => {
  const sql = createPgDriver(db.url, { max: 1 });
  let failOnce = true;
  const flaky: Sql = {
    ...sql,
    batch: (statements) => {
      if (failOnce) {
        failOnce = false;
        return Promise.reject(new Error('connection lost'));
      }
      return sql.batch(statements);
    },
  };
  try {
    const skiplock = createSkiplock({ sql: flaky, tasks: exampleTasks, autoMigrate: migrations });
    await expect(skiplock.stats()).rejects.toThrow('connection lost');
    await expect(skiplock.stats()).resolves.toMatchObject({ counts: expect.any(Object) });
  } finally {
    await sql.close();
  }
});
