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

export async function migrationsDataSource(): Promise<string> {
  const migrations = await loadMigrations();
  return `// Generated from migrations/*.sql by src/dev/migrations-data.ts (npm run migrations:data). Do not edit.
import type { Migration } from './migrate.ts';

export const migrations: readonly Migration[] = ${JSON.stringify(migrations, null, 2)};
`;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  await writeFile(MIGRATIONS_DATA_FILE, await migrationsDataSource());
  console.log(`wrote ${MIGRATIONS_DATA_FILE}`);
}
