/** Shared by the cron tests: a clock the test moves, and what the two cron tables hold. */
import { z } from 'zod';
import { createSkiplock, type Skiplock, type SkiplockConfig } from '../../src/runtime/skiplock.ts';
import { defineTask } from '../../src/runtime/tasks/task.ts';
import { statement, type Sql } from '../../src/store/sql.ts';

export const MINUTE = 60_000;

/** A clock passed into SQL (createSkiplock({ now })); tests set it instead of waiting. */
export function createClock(start: string | Date) {
  let at = new Date(start);
  return {
    now: () => at,
    set: (to: string | Date) => void (at = new Date(to)),
    advance: (ms: number) => void (at = new Date(at.getTime() + ms)),
  };
}

/** A no-op task that records nothing: enough for firing tests. */
export const noop = defineTask({ name: 'noop', payload: z.object({ n: z.number().optional() }).strict(), handler: () => null });

export function skiplockAt(sql: Sql, clock: { now: () => Date }, config: Partial<SkiplockConfig> = {}): Skiplock {
  return createSkiplock({ sql, tasks: [noop], now: clock.now, log: () => {}, ...config });
}

export interface FiringRow {
  scheduled_for: Date;
  job_id: string | null;
}

/** The firings of a schedule, oldest first. */
export async function firings(sql: Sql, name: string): Promise<FiringRow[]> {
  return sql.query<FiringRow & Record<string, unknown>>(
    statement(`SELECT scheduled_for, job_id::text AS job_id FROM skiplock.cron_firing WHERE schedule_name = $1 ORDER BY scheduled_for`, [name]),
  );
}

/** The jobs a schedule fired, oldest instant first. */
export async function scheduledJobs(sql: Sql, name: string) {
  return sql.query<{ id: string; scheduled_for: Date; status: string; schedule_state: unknown } & Record<string, unknown>>(
    statement(`SELECT id::text AS id, scheduled_for, status, schedule_state FROM skiplock.job WHERE schedule_name = $1 ORDER BY scheduled_for, id`, [name]),
  );
}

export const iso = (dates: readonly { scheduled_for: Date }[] | readonly Date[]) =>
  dates.map((d) => (d instanceof Date ? d : d.scheduled_for).toISOString());

export async function scheduleRow(sql: Sql, name: string) {
  const [row] = await sql.query(statement(`SELECT * FROM skiplock.schedule WHERE name = $1`, [name]));
  return row;
}
