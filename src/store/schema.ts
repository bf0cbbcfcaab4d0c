/**
 * Which of skiplock's migrations the database has, compared with those this version ships
 * (schema-version.ts, generated from migrations/), and the errors that say the schema is missing.
 */
import { MIGRATION_IDS, SCHEMA_VERSION } from './schema-version.ts';
import { sqlState, statement, type Sql, type Statement } from './sql.ts';

export interface SchemaStatus {
  /** The newest migration the database has applied; null when it has none (no skiplock.migration table). */
  applied: number | null;
  /** The newest migration this skiplock ships. */
  expected: number;
  /** Shipped migrations the database lacks. */
  missing: number[];
  /** current: all applied; missing: none at all; older: some lacking; newer: a later skiplock migrated it. */
  state: 'current' | 'missing' | 'older' | 'newer';
}

/** The migrations the database recorded (a few dozen rows at most). */
export function appliedMigrations(): Statement {
  return statement(`SELECT id FROM skiplock.migration ORDER BY id`);
}

// undefined_table, undefined_function, undefined_column, invalid_schema_name.
const UNDEFINED_OBJECT_STATES = new Set(['42P01', '42883', '42703', '3F000']);

/** Whether an error of a skiplock statement says one of its tables, functions or columns does not exist. */
export function isUndefinedObjectError(error: unknown, s: Statement): boolean {
  const state = sqlState(error);
  return state !== undefined && UNDEFINED_OBJECT_STATES.has(state) && s.text.includes('skiplock.');
}

/** What the database has, read with one statement. */
export async function readSchemaStatus(sql: Sql): Promise<SchemaStatus> {
  let ids: number[];
  try {
    ids = (await sql.query<{ id: number | string }>(appliedMigrations())).map((r) => Number(r.id));
  } catch (error) {
    if (!isUndefinedObjectError(error, appliedMigrations())) throw error;
    ids = [];
  }
  return compareSchema(ids);
}

export function compareSchema(appliedIds: readonly number[], shipped: readonly number[] = MIGRATION_IDS): SchemaStatus {
  const expected = shipped.at(-1) ?? SCHEMA_VERSION;
  const have = new Set(appliedIds);
  const applied = appliedIds.length === 0 ? null : Math.max(...appliedIds);
  const missing = shipped.filter((id) => !have.has(id));
  const state = applied === null ? 'missing' : missing.length > 0 ? 'older' : applied > expected ? 'newer' : 'current';
  return { applied, expected, missing, state };
}

/** The message a deployment gives while its database is not ready: what is wrong, and the two ways to fix it. */
export function notMigratedMessage(status: SchemaStatus | undefined): string {
  const fix =
    'run `npx skiplock migrate` with DATABASE_URL set, or migrate from code: pass `autoMigrate: migrations` ' +
    "(import { migrations } from 'skiplock/migrations') to createWorker, createNextHandlers, createVercelHandler or createSkiplock, whichever your project calls";
  if (status === undefined) return `the database lacks part of skiplock's schema: ${fix}`;
  if (status.state === 'missing') return `the database has no skiplock schema (this skiplock needs migrations up to ${pad(status.expected)}): ${fix}`;
  if (status.state === 'newer')
    return `the database's skiplock schema (migration ${pad(status.applied!)}) is newer than this skiplock knows (${pad(status.expected)}): upgrade skiplock in this deployment`;
  return `the database's skiplock schema is older than this skiplock (applied up to ${pad(status.applied!)}, missing ${status.missing.map(pad).join(', ')}; needs ${pad(status.expected)}): ${fix}`;
}

/** Whether a logged error's text is notMigratedMessage's (the tick logs only the first). */
export function isNotMigratedText(text: string): boolean {
  return text.includes(FIX_MARK) || text.includes(NEWER_MARK);
}
const FIX_MARK = 'run `npx skiplock migrate`';
const NEWER_MARK = 'upgrade skiplock in this deployment';

const pad = (id: number) => String(id).padStart(3, '0');
