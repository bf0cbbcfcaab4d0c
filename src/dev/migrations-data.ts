/**
 * Writes src/store/migrations-data.ts from migrations/*.sql: the migrations as data, so that a
 * Worker (no file system) can migrate itself and the packaged CLI needs no file lookup.
 * Run by `npm run build` (prebuild) and by hand after adding a migration (`npm run migrations:data`);
 * test/store/migrations-data.test.ts fails while the two differ.
 */
import { writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { loadMigrations } from '../store/migrations-fs.ts';

export const MIGRATIONS_DATA_FILE = fileURLToPath(new URL('../store/migrations-data.ts', import.meta.url));
export const SCHEMA_VERSION_FILE = fileURLToPath(new URL('../store/schema-version.ts', import.meta.url));

export async function migrationsDataSource(): Promise<string> {
  const migrations = await loadMigrations();
  return `// Generated from migrations/*.sql by src/dev/migrations-data.ts (npm run migrations:data). Do not edit.
import type { Migration } from './migrate.ts';

export const migrations: readonly Migration[] = ${JSON.stringify(migrations, null, 2)};
`;
}

/**
 * The ids of the bundled migrations alone, for the schema check every deployment makes: a module
 * apart from migrations-data.ts, so that a Worker that never migrates does not bundle their SQL.
 */
export async function schemaVersionSource(): Promise<string> {
  const ids = (await loadMigrations()).map((m) => m.id).sort((a, b) => a - b);
  return `// Generated from migrations/*.sql by src/dev/migrations-data.ts (npm run migrations:data). Do not edit.

/** The ids of the migrations this skiplock ships, in order. */
export const MIGRATION_IDS: readonly number[] = ${JSON.stringify(ids)};

/** The newest of them: the schema version this skiplock needs. */
export const SCHEMA_VERSION = ${ids.at(-1) ?? 0};
`;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  await writeFile(MIGRATIONS_DATA_FILE, await migrationsDataSource());
  await writeFile(SCHEMA_VERSION_FILE, await schemaVersionSource());
  console.log(`wrote ${MIGRATIONS_DATA_FILE} and ${SCHEMA_VERSION_FILE}`);
}
