/**
 * Applies the numbered .sql files of migrations/ in order, each in one non-interactive
 * transaction that first takes a transaction-scoped advisory lock. No session state is used, so
 * it works over Neon's HTTP driver, and any number of invocations may migrate at once: the
 * lock serializes them, and the unique migration id makes a late one roll back harmlessly (a
 * unique violation counts as "applied concurrently" only when the migration's row is then found).
 */
import { sqlState, statement, type Sql, type Statement } from './sql.ts';

export interface Migration {
  /** The number that prefixes the file name: 1 for 001_job.sql. */
  id: number;
  name: string;
  sql: string;
}

export interface MigrateResult {
  applied: number[];
  alreadyApplied: number[];
}

// Any constant works; it only has to be the same for every skiplock migrator.
const LOCK = statement(`SELECT pg_advisory_xact_lock(7301452913)`);

const BOOTSTRAP: Statement[] = [
  LOCK,
  statement(`CREATE SCHEMA IF NOT EXISTS skiplock`),
  statement(`CREATE TABLE IF NOT EXISTS skiplock.migration (
    id integer PRIMARY KEY,
    name text NOT NULL,
    checksum text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
  )`),
];

export async function migrate(sql: Sql, migrations: readonly Migration[]): Promise<MigrateResult> {
  await sql.batch(BOOTSTRAP);
  const rows = await sql.query<{ id: number; checksum: string }>(statement(`SELECT id, checksum FROM skiplock.migration`));
  const applied = new Map(rows.map((r) => [Number(r.id), r.checksum]));
  const result: MigrateResult = { applied: [], alreadyApplied: [] };

  for (const migration of [...migrations].sort((a, b) => a.id - b.id)) {
    const checksum = await sha256(migration.sql);
    const known = applied.get(migration.id);
    if (known !== undefined) {
      if (known !== checksum) throw new Error(`migration ${migration.name} was changed after it was applied`);
      result.alreadyApplied.push(migration.id);
      continue;
    }
    try {
      await sql.batch([
        LOCK,
        statement(`INSERT INTO skiplock.migration (id, name, checksum) VALUES ($1, $2, $3)`, [
          migration.id,
          migration.name,
          checksum,
        ]),
        ...splitStatements(migration.sql).map((text) => statement(text)),
      ]);
      result.applied.push(migration.id);
    } catch (error) {
      // Another migrator committed this one while we waited for the lock: our INSERT of its row
      // failed on the primary key. Any other unique violation (a CREATE UNIQUE INDEX on duplicate
      // data) is the migration failing, so the row is read again rather than trusting the code:
      // after the failed transaction, a row here can only be another migrator's committed one.
      if (sqlState(error) !== '23505' || !(await appliedElsewhere(sql, migration.id, checksum, migration.name))) throw error;
      result.alreadyApplied.push(migration.id);
    }
  }
  return result;
}

/** Whether another migrator recorded this migration (and with this very text). */
async function appliedElsewhere(sql: Sql, id: number, checksum: string, name: string): Promise<boolean> {
  const [row] = await sql.query<{ checksum: string }>(statement(`SELECT checksum FROM skiplock.migration WHERE id = $1`, [id]));
  if (!row) return false;
  if (row.checksum !== checksum) throw new Error(`migration ${name} was changed after it was applied`);
  return true;
}

/**
 * Numbers no migration has, and why: `migrate` lists ids, and a person reading 6, 8 asks where 7
 * went. The ids only order the migrations; they need not be consecutive.
 */
export const UNUSED_MIGRATION_IDS: Readonly<Record<number, string>> = {
  7: '006 and 008 were written side by side on two branches, in issue 11, and 007 was left out',
};

/** One sentence on the numbers missing between the shipped migrations (undefined: none is). */
export function migrationGapNote(ids: readonly number[]): string | undefined {
  const sorted = [...ids].sort((a, b) => a - b);
  const gaps: number[] = [];
  for (let i = 1; i < sorted.length; i++) for (let id = sorted[i - 1]! + 1; id < sorted[i]!; id++) gaps.push(id);
  if (gaps.length === 0) return undefined;
  const each = gaps.map((id) => `there is no migration ${id}: never used${UNUSED_MIGRATION_IDS[id] ? ` (${UNUSED_MIGRATION_IDS[id]})` : ''}`);
  return `${each.join('; ')}; the numbers need not be consecutive`;
}

/** "1, 2, …, 6, 8, … (there is no migration 7: …)": the ids a start-up applied, for its log line. */
export function appliedMigrationsText(applied: readonly number[], shipped: readonly number[]): string {
  if (applied.length === 0) return '';
  const [lo, hi] = [Math.min(...applied), Math.max(...applied)];
  const note = migrationGapNote(shipped.filter((id) => id >= lo && id <= hi));
  return note === undefined ? applied.join(', ') : `${applied.join(', ')} (${note})`;
}

/** Parses `001_job.sql` into its id; other names are not migrations. */
export function parseMigrationName(fileName: string): number | undefined {
  const match = /^(\d+)_[\w-]+\.sql$/.exec(fileName);
  return match ? Number(match[1]) : undefined;
}

/**
 * Splits a migration into statements (the HTTP driver runs one per query). Semicolons inside
 * quotes, dollar-quoted bodies and comments do not split.
 */
export function splitStatements(text: string): string[] {
  const statements: string[] = [];
  let current = '';
  let i = 0;
  const skipTo = (end: string, from: number) => {
    const at = text.indexOf(end, from);
    return at === -1 ? text.length : at + end.length;
  };
  while (i < text.length) {
    const rest = text.slice(i, i + 2);
    let next: number;
    if (rest === '--') next = skipTo('\n', i);
    else if (rest === '/*') next = skipTo('*/', i + 2);
    else if (text[i] === "'" || text[i] === '"') next = skipTo(text[i]!, i + 1);
    else if (text[i] === '$') {
      const tag = /^\$(?:[A-Za-z_][A-Za-z0-9_]*)?\$/.exec(text.slice(i))?.[0];
      next = tag ? skipTo(tag, i + tag.length) : i + 1;
    } else if (text[i] === ';') {
      if (current.trim()) statements.push(current.trim());
      current = '';
      i += 1;
      continue;
    } else next = i + 1;
    // Comments are dropped; everything else is kept verbatim.
    if (rest !== '--' && rest !== '/*') current += text.slice(i, next);
    else current += ' ';
    i = next;
  }
  if (current.trim()) statements.push(current.trim());
  return statements;
}

async function sha256(text: string): Promise<string> {
  const digest = await crypto.subtle.digest('SHA-256', new TextEncoder().encode(text));
  return [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, '0')).join('');
}
