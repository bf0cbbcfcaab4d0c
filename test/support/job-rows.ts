/** A job's row read straight from the database, and a wait for its status: what the wake-up tests poll. */
import { statement, type Sql } from '../../src/store/sql.ts';

/** The columns the tests look at: status, attempts and the instants of its life. */
export async function jobRow(sql: Sql, id: string): Promise<Record<string, unknown>> {
  const [r] = await sql.query(statement(`SELECT status, attempts, run_at, created_at, started_at, finished_at, locked_until FROM skiplock.job WHERE id = $1`, [id]));
  if (!r) throw new Error(`no job ${id}`);
  return r;
}

/** The row once it has `status`, or as it is after `timeoutMs` (the caller's expect says which). */
export async function untilStatus(sql: Sql, id: string, status: string, timeoutMs = 8_000, everyMs = 20): Promise<Record<string, unknown>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const r = await jobRow(sql, id);
    if (r.status === status || Date.now() > deadline) return r;
    await new Promise((resolve) => setTimeout(resolve, everyMs));
  }
}
