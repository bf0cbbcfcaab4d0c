/**
 * Migrating from the library: skiplock.migrate (then registering this deployment's tasks, as soon
 * as the schema can hold them), and the Sql port of `autoMigrate` that applies the migrations
 * before its first statement. The migrations themselves and their lock: src/store/migrate.ts.
 */
import { migrate, type Migration, type MigrateResult } from '../../store/migrate.ts';
import type { Sql } from '../../store/sql.ts';
import type { SkiplockContext } from '../context.ts';
import { registerNow, type TaskRegistration } from '../events/operations.ts';

/**
 * skiplock.migrate. `sql`: the port as the caller gave it — neither guarded for not_migrated nor
 * migrating first (autoMigrate) — which applies the migrations and registers the tasks.
 */
export function createMigrate(ctx: Pick<SkiplockContext, 'now' | 'log' | 'registry'>, sql: Sql, registration: TaskRegistration) {
  return async (migrations: readonly Migration[]): Promise<MigrateResult> => {
    const result = await migrate(sql, migrations);
    // Registered as soon as the schema can hold it: a send right after a deploy's migrate finds this deployment's on: tasks.
    await registerNow({ ...ctx, sql }, registration);
    return result;
  };
}

/**
 * The Sql port, with the migrations applied before its first statement (autoMigrate).
 * One attempt at a time per instance; a failed attempt is retried by the next statement.
 */
export function migratingFirst(sql: Sql, migrations: readonly Migration[]): Sql {
  let ready: Promise<unknown> | undefined;
  const migrated = () => {
    ready ??= migrate(sql, migrations).catch((error: unknown) => {
      ready = undefined;
      throw error;
    });
    return ready;
  };
  return {
    async query(statement) {
      await migrated();
      return sql.query(statement);
    },
    async batch(statements) {
      await migrated();
      return sql.batch(statements);
    },
    close: () => sql.close(),
  };
}
