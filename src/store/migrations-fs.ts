/** Node-only: reads migrations/ from disk. Workers bundle no files; they migrate from a deploy step. */
import { readdir, readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { join } from 'node:path';
import { parseMigrationName, type Migration } from './migrate.ts';

export const MIGRATIONS_DIR = fileURLToPath(new URL('../../migrations/', import.meta.url));

export async function loadMigrations(dir: string = MIGRATIONS_DIR): Promise<Migration[]> {
  const migrations: Migration[] = [];
  for (const name of (await readdir(dir)).sort()) {
    const id = parseMigrationName(name);
    if (id !== undefined) migrations.push({ id, name, sql: await readFile(join(dir, name), 'utf8') });
  }
  return migrations;
}
