/**
 * Starts one real PostgreSQL for the whole run and a template database with every migration
 * applied; each test file clones the template (test/support/db.ts), so files run in parallel
 * without sharing rows.
 */
import { mkdtemp, rm, chmod } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestProject } from 'vitest/node';
import { startLocalPostgres } from '../../src/dev/embedded-postgres.ts';
import { createPgDriver } from '../../src/store/drivers/pg.ts';
import { migrate } from '../../src/store/migrate.ts';
import { loadMigrations } from '../../src/store/migrations-fs.ts';
import { statement } from '../../src/store/sql.ts';
import { HAND_WRITES } from './hand-writes.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    /** Connection string of the server's maintenance database. */
    pgAdminUrl: string;
    /** Connection string template: replace DBNAME with a database name. */
    pgUrlTemplate: string;
  }
}

export const TEMPLATE_DB = 'skiplock_template';

export default async function setup(project: TestProject) {
  const root = await mkdtemp(join(tmpdir(), 'skiplock-test-'));
  await chmod(root, 0o755);
  const pg = await startLocalPostgres({ dir: join(root, 'data'), persistent: false });
  const admin = createPgDriver(pg.url);
  await admin.query(statement(`CREATE DATABASE ${TEMPLATE_DB}`));
  const template = createPgDriver(pg.urlFor(TEMPLATE_DB));
  await migrate(template, await loadMigrations());
  for (const s of HAND_WRITES) await template.query(s);
  await template.close();
  await admin.close();

  project.provide('pgAdminUrl', pg.url);
  project.provide('pgUrlTemplate', pg.urlFor('DBNAME'));

  return async () => {
    await pg.stop();
    await rm(root, { recursive: true, force: true });
  };
}
