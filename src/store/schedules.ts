/**
 * Every statement on schedules and cron firings. Pure builders, one Statement each; `$1` is the
 * clock, as in claim.ts. Watermarks are stored to the millisecond, so that the value a tick read
 * and compares against later is exactly what JavaScript can hold.
 */
import { NOW, clock, type Clock } from './clock.ts';
import { QUEUE_INSERT, queueRowsFrom } from './queue.ts';
import { statement, type Statement } from './sql.ts';

const NOW_MS = `date_trunc('milliseconds', ${NOW})`;

/** The columns a definition sets; a change in any of them is a new revision. */
const DEFINITION = ['cron', 'every_ms', 'daily', 'tz', 'task', 'payload', 'enabled', 'catch_up', 'overlap', 'max_firings_per_tick'] as const;
const columns = (alias: string) => DEFINITION.map((c) => `${alias}.${c}`).join(', ');
const RECORD = `name text, cron text, every_ms bigint, daily text[], tz text, task text, payload jsonb,
  enabled boolean, catch_up text, overlap text, max_firings_per_tick int`;
/**
 * A static schedule that a deployment able to run its task ticks without has been removed from
 * that code: the sync notes when (missing_since), at most once a MISSING_NOTE_AFTER after the
 * row's last write, so that old and new versions ticking side by side (a rolling deploy) write
 * about once a minute, not on every tick. Back in the code after more than MISSING_GRACE, it
 * starts from now, as a re-enabled schedule does; back sooner, it keeps its watermark (catching
 * up as after any pause). A deployment without the task (another service on the same database)
 * never notes anything.
 */
export const MISSING_NOTE_AFTER = "interval '1 minute'";
export const MISSING_GRACE = "interval '10 minutes'";

/** Starts from now rather than catching up: re-enabled, or back after being missing for long. */
const RESTARTS = (s: string) => `(NOT ${s}.enabled OR ${s}.missing_since < ${NOW} - ${MISSING_GRACE})`;

/** On a definition change (or a return): the new definition, a new revision, the next run to recompute. */
const REDEFINE = `${DEFINITION.map((c) => `${c} = excluded.${c}`).join(', ')},
  revision = s.revision + 1, next_run_at = NULL,
  -- Instants that passed while it was disabled, or long missing from the code, are not caught up.
  watermark = CASE WHEN ${RESTARTS('s')} THEN excluded.watermark ELSE s.watermark END,
  missing_since = NULL,
  updated_at = excluded.updated_at`;

/** A schedule definition as stored (snake_case, like the table). */
export interface ScheduleRowInput {
  name: string;
  cron: string | null;
  every_ms: number | null;
  daily: string[] | null;
  tz: string;
  task: string;
  payload: unknown;
  enabled: boolean;
  catch_up: string;
  overlap: string;
  max_firings_per_tick: number;
}

/** The last firing of `s`, its job's status, for listing. `from` binds the alias s. */
const WITH_LAST_FIRING = (from: string, columns = '') => `
  SELECT ${columns}s.*, f.scheduled_for AS last_scheduled_for, f.fired_at AS last_fired_at, f.job_id::text AS last_job_id,
         j.status AS last_status
    FROM ${from}
    LEFT JOIN LATERAL (SELECT c.scheduled_for, c.fired_at, c.job_id FROM skiplock.cron_firing c
                        WHERE c.schedule_name = s.name ORDER BY c.scheduled_for DESC LIMIT 1) f ON true
    LEFT JOIN skiplock.job j ON j.id = f.job_id`;

/**
 * The tick's first read: upserts the static schedules whose definition changed (usually none,
 * so usually nothing is written), then returns the enabled schedules that are due — static ones
 * only if this deployment defines them — with the clock. No row: nothing to fire.
 *
 * A static schedule takes over a dynamic one of the same name (keeping its watermark, state and
 * history, like a put): the code is the definition this deployment can see and change. Such a
 * row comes back with `taken_over`, for the caller to say so.
 *
 * Static schedules of this deployment's `tasks` that it does not define are noted missing (see
 * MISSING_GRACE); SKIP LOCKED, so that noting never waits for a tick that is firing them.
 */
export function readDueSchedules(p: { now: Clock; statics: readonly ScheduleRowInput[]; tasks?: readonly string[] }): Statement {
  return statement(
    `WITH defs AS (SELECT * FROM jsonb_to_recordset($2::jsonb) AS d(${RECORD})),
     taken AS (SELECT x.name FROM skiplock.schedule x JOIN defs d ON d.name = x.name WHERE x.source = 'dynamic'),
     absent AS MATERIALIZED (
       SELECT x.name FROM skiplock.schedule x
        WHERE x.source = 'static' AND x.missing_since IS NULL AND x.task = ANY ($3::text[])
          AND x.updated_at < ${NOW} - ${MISSING_NOTE_AFTER} AND x.name NOT IN (SELECT name FROM defs)
        FOR UPDATE SKIP LOCKED
     ),
     noted AS (
       UPDATE skiplock.schedule s SET missing_since = ${NOW}, updated_at = ${NOW}
        WHERE s.name IN (SELECT name FROM absent)
     ),
     synced AS (
       INSERT INTO skiplock.schedule AS s (name, source, ${DEFINITION.join(', ')}, watermark, created_at, updated_at)
       SELECT d.name, 'static', ${columns('d')}, ${NOW_MS}, ${NOW}, ${NOW}
         FROM defs d LEFT JOIN skiplock.schedule x ON x.name = d.name
        WHERE x.name IS NULL OR x.source = 'dynamic' OR x.missing_since IS NOT NULL
           OR (${columns('x')}) IS DISTINCT FROM (${columns('d')})
        ORDER BY d.name
       ON CONFLICT (name) DO UPDATE SET source = 'static', ${REDEFINE}
        WHERE s.source = 'dynamic' OR s.missing_since IS NOT NULL OR (${columns('s')}) IS DISTINCT FROM (${columns('excluded')})
       RETURNING s.*
     )
     SELECT ${NOW_MS} AS now, s.name IN (SELECT name FROM taken) AS taken_over, s.* FROM synced s WHERE s.enabled
     UNION ALL
     SELECT ${NOW_MS} AS now, false AS taken_over, s.* FROM skiplock.schedule s
      WHERE s.enabled AND (s.next_run_at IS NULL OR s.next_run_at <= ${NOW})
        AND (s.source = 'dynamic' OR s.name IN (SELECT name FROM defs))
        AND s.name NOT IN (SELECT name FROM synced)`,
    [clock(p.now), JSON.stringify(p.statics), p.tasks ?? []],
  );
}

/** One schedule's plan for this tick (src/core/firing-plan.ts), with the read it was made from. */
export interface FiringPlanRow {
  name: string;
  /** The revision and watermark the plan was computed from: applied only if both are unchanged. */
  revision: number;
  watermark: string;
  instants: string[];
  advance_to: string;
  next_run_at: string | null;
  busy_advance_to: string;
  busy_next_run_at: string | null;
  /** Of the jobs to insert, from the task's definition. */
  priority: number;
  max_attempts: number;
  timeout_ms: number;
  /** Flow control keys of its jobs (src/runtime/flow/keys.ts); null for a task without limits. */
  flow_key?: string | null;
  rate_key?: string | null;
  fair_key?: string | null;
  batch_key?: string | null;
}

/** Firing history kept per schedule; older firings are deleted when the schedule fires again. */
export const FIRING_HISTORY = "interval '7 days'";

/**
 * Fires the planned instants, in one statement:
 *   locked   the schedules whose revision and watermark are still those the plan was made from
 *            (FOR UPDATE SKIP LOCKED: a schedule another tick is firing right now is left to it);
 *            `busy` when overlap is 'skip' and a job of the schedule is live (has a queue row):
 *            QUEUED, RUNNING, or WAITING (a sleep, a wait, its children)
 *   advanced moves their watermark and next run (past every due instant when busy)
 *   firings  one row per instant, ON CONFLICT DO NOTHING, each with a job id drawn from the
 *            job sequence; only the rows actually inserted are returned
 *   jobs     one job per returned firing, with that id (its record, and its queue row: queued):
 *            a firing and its job land together or not at all (the job_id foreign key is checked
 *            at the end of the statement)
 *   pruned   firing history older than FIRING_HISTORY of the schedules that fired
 * Returns how many jobs were inserted.
 */
export function fireSchedules(p: { now: Clock; plans: readonly FiringPlanRow[] }): Statement {
  return statement(
    `WITH plan AS (
       SELECT * FROM jsonb_to_recordset($2::jsonb) AS p(
         name text, revision int, watermark timestamptz, instants timestamptz[], advance_to timestamptz,
         next_run_at timestamptz, busy_advance_to timestamptz, busy_next_run_at timestamptz,
         priority smallint, max_attempts int, timeout_ms int, flow_key text, rate_key text, fair_key text, batch_key text)
     ),
     locked AS MATERIALIZED (
       SELECT s.name, s.task, s.payload, s.state, p.instants, p.advance_to, p.next_run_at,
              p.busy_advance_to, p.busy_next_run_at, p.priority, p.max_attempts, p.timeout_ms, p.flow_key, p.rate_key, p.fair_key, p.batch_key,
              -- A live job is one with a queue row (job_schedule_live_idx).
              (s.overlap = 'skip' AND EXISTS (
                 SELECT 1 FROM skiplock.queue j WHERE j.schedule_name = s.name AND j.schedule_name IS NOT NULL)) AS busy
         FROM skiplock.schedule s JOIN plan p ON p.name = s.name
        WHERE s.enabled AND s.revision = p.revision AND s.watermark = p.watermark
        ORDER BY s.name
        FOR UPDATE OF s SKIP LOCKED
     ),
     advanced AS (
       UPDATE skiplock.schedule s SET
         watermark = CASE WHEN l.busy THEN l.busy_advance_to ELSE l.advance_to END,
         next_run_at = CASE WHEN l.busy THEN l.busy_next_run_at ELSE l.next_run_at END
       FROM locked l WHERE s.name = l.name
       RETURNING s.name
     ),
     firings AS (
       INSERT INTO skiplock.cron_firing (schedule_name, scheduled_for, job_id, fired_at)
       SELECT l.name, i.at, nextval(pg_get_serial_sequence('skiplock.job_record', 'id')), ${NOW}
         FROM locked l CROSS JOIN LATERAL unnest(l.instants) AS i(at)
        WHERE NOT l.busy
        ORDER BY l.name, i.at
       ON CONFLICT DO NOTHING
       RETURNING schedule_name, scheduled_for, job_id
     ),
     jobs AS (
       INSERT INTO skiplock.job_record (id, task, payload, priority, run_at, max_attempts, timeout_ms,
                                        schedule_name, scheduled_for, schedule_state, flow_key, rate_key, fair_key, batch_key, created_at, updated_at)
       OVERRIDING SYSTEM VALUE
       SELECT f.job_id, l.task, l.payload, l.priority, f.scheduled_for, l.max_attempts, l.timeout_ms,
              f.schedule_name, f.scheduled_for, l.state, l.flow_key, l.rate_key, l.fair_key, l.batch_key, ${NOW}, ${NOW}
         FROM firings f JOIN locked l ON l.name = f.schedule_name
        ORDER BY f.job_id
       RETURNING *
     ),
     queued AS (
       ${QUEUE_INSERT}
       ${queueRowsFrom('jobs')}
     ),
     pruned AS (
       DELETE FROM skiplock.cron_firing c
        WHERE c.schedule_name IN (SELECT schedule_name FROM firings)
          AND c.scheduled_for < ${NOW} - ${FIRING_HISTORY}
     )
     SELECT (SELECT count(*)::int FROM jobs) AS fired, (SELECT count(*)::int FROM advanced) AS advanced`,
    [clock(p.now), JSON.stringify(p.plans)],
  );
}

/**
 * Creates or replaces a dynamic schedule. A replaced definition keeps its watermark, state and
 * history (its next run is recomputed); an unchanged one is left as it is.
 */
export function putSchedule(p: { now: Clock; schedule: ScheduleRowInput }): Statement {
  const changed = `((${columns('s')}) IS DISTINCT FROM (${columns('excluded')}) OR s.source <> 'dynamic')`;
  return statement(
    `WITH put AS (
       INSERT INTO skiplock.schedule AS s (name, source, ${DEFINITION.join(', ')}, watermark, created_at, updated_at)
       SELECT d.name, 'dynamic', ${columns('d')}, ${NOW_MS}, ${NOW}, ${NOW}
         FROM jsonb_to_recordset($2::jsonb) AS d(${RECORD})
       ON CONFLICT (name) DO UPDATE SET source = 'dynamic', ${DEFINITION.map((c) => `${c} = excluded.${c}`).join(', ')},
         revision = s.revision + CASE WHEN ${changed} THEN 1 ELSE 0 END,
         next_run_at = CASE WHEN ${changed} THEN NULL ELSE s.next_run_at END,
         watermark = CASE WHEN ${RESTARTS('s')} THEN excluded.watermark ELSE s.watermark END,
         missing_since = NULL,
         updated_at = CASE WHEN ${changed} THEN excluded.updated_at ELSE s.updated_at END
       RETURNING s.*, (s.xmax::text = '0') AS created
     )
     ${WITH_LAST_FIRING('put s')}`,
    [clock(p.now), JSON.stringify([p.schedule])],
  );
}

/** Deletes a schedule and its firing history; its jobs stay. */
export function deleteSchedule(p: { name: string }): Statement {
  return statement(`DELETE FROM skiplock.schedule WHERE name = $1 RETURNING name, source`, [p.name]);
}

/**
 * One page of the schedules a deployment lists: every dynamic one and the static ones it defines
 * — including those no tick has stored yet, which come back with only `listed_name` (the caller
 * fills them in from code). By name in byte order (COLLATE "C", as JavaScript sorts), after the
 * cursor `after`, and only names that start with `prefix` when one is given.
 */
export function listSchedules(p: { staticNames: readonly string[]; after: string | null; prefix: string | null; limit: number }): Statement {
  const page = `(SELECT name FROM (SELECT name FROM skiplock.schedule WHERE source = 'dynamic' OR name = ANY($1::text[])
                                  UNION SELECT unnest($1::text[])) n
                  WHERE ($2::text IS NULL OR name COLLATE "C" > $2::text COLLATE "C")
                    AND ($4::text IS NULL OR starts_with(name, $4::text))
                  ORDER BY name COLLATE "C" LIMIT $3) page
                LEFT JOIN skiplock.schedule s ON s.name = page.name`;
  return statement(`${WITH_LAST_FIRING(page, 'page.name AS listed_name, ')} ORDER BY page.name COLLATE "C"`, [p.staticNames, p.after, p.limit, p.prefix]);
}
