/**
 * Fires the due schedules: what every tick does first (TickDeps.beforeClaim).
 *
 *   1. readDueSchedules ... one round trip: syncs changed static definitions, returns the due
 *                           schedules and the database's clock (usually no row: done)
 *   2. planFiring ......... in JS, per schedule: the instants in (watermark, now] under its
 *                           catch-up policy and bound
 *   3. fireSchedules ...... one statement: firings + jobs + watermarks, applied only where the
 *                           watermark is still the one read in 1 — so racing ticks fire once
 */
import { planFiring } from '../../core/firing-plan.ts';
import type { CatchUp, Overlap, Timing } from '../../core/schedule.ts';
import { timelineOf } from '../../core/schedule-timeline.ts';
import type { Clock } from '../../store/clock.ts';
import { toBool, toDate } from '../../store/rows.ts';
import { fireSchedules, readDueSchedules, type FiringPlanRow, type ScheduleRowInput } from '../../store/schedules.ts';
import type { Row, Sql } from '../../store/sql.ts';
import { jobKeys } from '../flow/keys.ts';
import type { Task, TaskRegistry } from '../tasks/task.ts';
import type { Logger, WarnOnce } from '../observability/log.ts';

export interface FiringDeps {
  sql: Sql;
  registry: TaskRegistry;
  /** The static schedules of this deployment, as rows. */
  statics: readonly ScheduleRowInput[];
  now: () => Clock;
  log: Logger;
  warnOnce: WarnOnce;
}

/** Resolves to how many jobs it fired. */
export async function fireDueSchedules(deps: FiringDeps): Promise<number> {
  const now = deps.now();
  const due = await deps.sql.query(readDueSchedules({ now, statics: deps.statics, tasks: [...deps.registry.keys()] }));
  if (due.length === 0) return 0;

  const plans: FiringPlanRow[] = [];
  for (const row of due) {
    const name = String(row.name);
    if (toBool(row.taken_over)) deps.log('warn', 'a schedule defined in code replaced the dynamic schedule of the same name', { schedule: name });
    const task = deps.registry.get(String(row.task));
    if (!task) {
      // Another deployment may run this task; this one must not enqueue what it cannot check.
      deps.warnOnce(`unregistered:${name}\u0000${String(row.task)}`, 'schedule not fired: its task is not registered in this deployment', { schedule: name, task: row.task });
      continue;
    }
    try {
      const plan = planFiring(
        timelineOf(timingOf(row), name),
        { catchUp: row.catch_up as CatchUp, overlap: row.overlap as Overlap, maxFiringsPerTick: Number(row.max_firings_per_tick) },
        toDate(row.watermark),
        toDate(row.now),
      );
      plans.push({
        name,
        revision: Number(row.revision),
        watermark: toDate(row.watermark).toISOString(),
        instants: plan.instants.map((d) => d.toISOString()),
        advance_to: plan.advanceTo.toISOString(),
        next_run_at: plan.nextRunAt?.toISOString() ?? null,
        busy_advance_to: plan.busyAdvanceTo.toISOString(),
        busy_next_run_at: plan.busyNextRunAt?.toISOString() ?? null,
        priority: task.priority,
        max_attempts: task.maxAttempts,
        timeout_ms: task.timeoutMs,
        ...jobKeys(task, scheduledPayload(task, row.payload)),
      });
    } catch (error) {
      // A stored timing this runtime cannot read (a time zone its ICU lacks): the others still fire.
      deps.log('error', 'schedule not fired: its timing could not be computed', { schedule: name, error: String(error) });
    }
  }
  if (plans.length === 0) return 0;
  const [result] = await deps.sql.query(fireSchedules({ now, plans }));
  return Number(result?.fired ?? 0);
}

/** A stored row's timing (text[] arrives parsed from pg, as text from drivers that return raw text). */
export function timingOf(row: Row): Timing {
  return {
    cron: row.cron === null || row.cron === undefined ? null : String(row.cron),
    everyMs: row.every_ms === null || row.every_ms === undefined ? null : Number(row.every_ms),
    daily: row.daily === null || row.daily === undefined ? null : toTextArray(row.daily),
    tz: String(row.tz),
  };
}

function toTextArray(value: unknown): string[] {
  if (Array.isArray(value)) return value.map(String);
  const text = String(value);
  return text === '{}' ? [] : text.replace(/^\{|\}$/g, '').split(',').map((item) => item.replace(/^"|"$/g, ''));
}

/** The payload a scheduled job's handler will get (parsed by its task's schema), for its flow keys. */
function scheduledPayload(task: Task, stored: unknown): unknown {
  const value = typeof stored === 'string' ? JSON.parse(stored) : stored;
  const parsed = task.payload.safeParse(value);
  return parsed.success ? parsed.data : value;
}
