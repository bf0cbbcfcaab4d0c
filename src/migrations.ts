/**
 * `skiplock/migrations`: the schema migrations as data, so that any runtime can migrate (a Worker
 * has no files): `await skiplock.migrate(migrations)`, `createSkiplock({ autoMigrate: migrations })`,
 * or `migrate(sql, migrations)` for a bare Sql port. Safe to run from several places at once (an advisory lock).
 */
export { migrations } from './store/migrations-data.ts';
export { migrate, type Migration, type MigrateResult } from './store/migrate.ts';
