/**
 * Telling a deployment whose database is not migrated (or migrated by an older skiplock) from a
 * broken one, without a statement per request: the schema is read once per instance and, once
 * current, trusted until a skiplock statement fails on a missing table, function or column.
 */
import { NotMigratedError, SkiplockError } from '../../core/errors.ts';
import { isUndefinedObjectError, notMigratedMessage, readSchemaStatus, type SchemaStatus } from '../../store/schema.ts';
import type { Sql, Statement } from '../../store/sql.ts';
import type { Logger } from '../observability/log.ts';

export interface SchemaCheck {
  /** Resolves when the database has every shipped migration (or a newer schema); else rejects with not_migrated. */
  ensure(): Promise<void>;
  /** The database's schema as read now (one statement). */
  status(): Promise<SchemaStatus>;
  /** `sql` with a missing table, function or column of a skiplock statement reported as not_migrated. */
  guard(sql: Sql): Sql;
}

export function createSchemaCheck(sql: Sql, log: Logger): SchemaCheck {
  let current: Promise<void> | undefined;
  let warnedNewer = false;
  const status = () => readSchemaStatus(sql);
  const ensure = () =>
    (current ??= status().then((s) => {
      if (s.state === 'newer' && !warnedNewer) {
        warnedNewer = true;
        log('warn', notMigratedMessage(s));
      }
      if (s.state === 'missing' || s.state === 'older') throw new NotMigratedError(notMigratedMessage(s));
    })).catch((error: unknown) => {
      current = undefined; // checked again next time: a migration may run meanwhile
      throw error;
    });

  const notMigrated = async (error: unknown): Promise<NotMigratedError> => {
    current = undefined;
    const s = await status().catch(() => undefined);
    return new NotMigratedError(notMigratedMessage(s?.state === 'current' ? undefined : s), { cause: error });
  };
  const guard = (inner: Sql): Sql => ({
    async query(s) {
      try {
        return await inner.query(s);
      } catch (error) {
        throw isUndefinedObjectError(error, s) ? await notMigrated(error) : error;
      }
    },
    async batch(statements: readonly Statement[]) {
      try {
        return await inner.batch(statements);
      } catch (error) {
        throw statements.some((s) => isUndefinedObjectError(error, s)) ? await notMigrated(error) : error;
      }
    },
    close: () => inner.close(),
  });
  return { ensure, status, guard };
}

/** Whether an error is the not_migrated one (the tick logs it once per instance, not once per poll). */
export function isNotMigrated(error: unknown): boolean {
  return error instanceof SkiplockError && error.code === 'not_migrated';
}
