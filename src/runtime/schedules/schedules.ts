/**
 * Schedules on the Skiplock facade: the static ones from createSkiplock({ schedules }), the
 * dynamic ones put and deleted at run time, the listing of both, and firing (each tick).
 */
import { checkRange, SkiplockError } from '../../core/errors.ts';
import { SCHEDULE_NAME, type CatchUp, type Overlap } from '../../core/schedule.ts';
import { timelineOf } from '../../core/schedule-timeline.ts';
import type { JobStatus } from '../../core/types.ts';
import type { Clock } from '../../store/clock.ts';
import { toBool, toDate } from '../../store/rows.ts';
import { deleteSchedule, listSchedules, putSchedule } from '../../store/schedules.ts';
import type { Row, Sql } from '../../store/sql.ts';
import { fireDueSchedules, timingOf } from './fire-due.ts';
import { bindStaticSchedule, parseDynamicSchedule, toScheduleRow, type Schedule, type ScheduleInput } from './definition.ts';
import type { TaskRegistry } from '../tasks/task.ts';
import type { Logger, WarnOnce } from '../observability/log.ts';

/** A schedule as listed: its definition, where it comes from, and what it did last. */
export interface ScheduleInfo {
  name: string;
  /** 'static': defined in code (createSkiplock({ schedules })); 'dynamic': put at run time. */
  source: 'static' | 'dynamic';
  cron: string | null;
  /** The interval in ms, for `every` schedules. */
  every: number | null;
  daily: string[] | null;
  tz: string;
  task: string;
  payload: unknown;
  enabled: boolean;
  catchUp: CatchUp;
  overlap: Overlap;
  maxFiringsPerTick: number;
  /** The first instant not yet fired (in the past when overdue); null when disabled. */
  nextRunAt: Date | null;
  /** When the last firing happened (the database's clock), and for which instant. */
  lastFiredAt: Date | null;
  lastScheduledFor: Date | null;
  /** The job of the last firing, and its status (null once retention deleted it). */
  lastJobId: string | null;
  lastStatus: JobStatus | null;
  /** The recurring state its runs read and replace (null until one sets it). */
  state: unknown;
}

/** Page sizes of listSchedules (and GET /v1/schedules). */
export const SCHEDULE_LIST_LIMIT = { default: 100, max: 1000 } as const;

export interface ListSchedulesOptions {
  /** Page size, 1 to 1000. Default 100. */
  limit?: number;
  /** `nextCursor` of the previous page (the last name listed); omitted for the first page. */
  cursor?: string;
  /** Only schedules whose name starts with it (one tenant's, say); plain characters, no patterns. */
  prefix?: string;
}

export interface SchedulePage {
  /** By name (byte order). */
  schedules: ScheduleInfo[];
  /** Pass it as `cursor` for the next page; null on the last page. */
  nextCursor: string | null;
}

export interface PutScheduleResult {
  schedule: ScheduleInfo;
  /** False when a schedule of that name was replaced. */
  created: boolean;
}

export interface ScheduleOperations {
  /**
   * Creates or replaces a dynamic schedule, checked like an enqueue: SkiplockError
   * invalid_request, unknown_task, invalid_payload; conflict for the name of a static schedule.
   * A replaced schedule keeps its watermark, state and history.
   */
  putSchedule(name: string, input: ScheduleInput): Promise<PutScheduleResult>;
  /** Removes a dynamic schedule and its firing history (its jobs stay); false when there was none. */
  deleteSchedule(name: string): Promise<boolean>;
  /**
   * The static schedules of this deployment and every dynamic one, by name, a page at a time
   * (a schedule per tenant makes many). SkiplockError invalid_request for a bad limit or cursor.
   */
  listSchedules(options?: ListSchedulesOptions): Promise<SchedulePage>;
  /** One schedule as listSchedules shows it: a static one of this deployment or a dynamic one. */
  getSchedule(name: string): Promise<ScheduleInfo | undefined>;
  /** Fires the due schedules now (each tick does this first); resolves to how many jobs it fired. */
  fireDueSchedules(): Promise<number>;
}

export interface ScheduleDeps {
  sql: Sql;
  registry: TaskRegistry;
  /** Static schedules (defineSchedule); checked here against the tasks, TypeError when they do not fit. */
  schedules: readonly Schedule[];
  now: () => Clock;
  log: Logger;
  warnOnce: WarnOnce;
}

export function createScheduleOperations(deps: ScheduleDeps): ScheduleOperations {
  const { sql, registry, now } = deps;
  const statics = new Map<string, Schedule>();
  for (const schedule of deps.schedules) {
    if (statics.has(schedule.name)) throw new TypeError(`schedule ${schedule.name} is defined twice`);
    statics.set(schedule.name, bindStaticSchedule(schedule, registry));
  }
  const staticRows = [...statics.values()].map(toScheduleRow);

  const refuseStatic = (name: string) => {
    if (statics.has(name)) throw new SkiplockError('conflict', `schedule ${name} is defined in code; change it there`);
  };

  const list = async (options: ListSchedulesOptions = {}): Promise<SchedulePage> => {
    const limit = options.limit ?? SCHEDULE_LIST_LIMIT.default;
    checkRange('limit', limit, SCHEDULE_LIST_LIMIT.max);
    if (options.cursor !== undefined && !SCHEDULE_NAME.test(options.cursor))
      throw new SkiplockError('invalid_request', 'cursor must be the nextCursor of a previous page', [{ path: ['cursor'], message: 'not a schedule name' }]);
    if (options.prefix !== undefined && !SCHEDULE_NAME.test(options.prefix))
      throw new SkiplockError('invalid_request', 'prefix must be the start of a schedule name: 1–200 of [A-Za-z0-9_.:-]', [{ path: ['prefix'], message: 'not a schedule name' }]);
    // One row more than asked tells whether another page exists.
    const rows = await sql.query(listSchedules({ staticNames: [...statics.keys()], after: options.cursor ?? null, prefix: options.prefix ?? null, limit: limit + 1 }));
    // A static schedule no tick has stored yet is still listed, from its definition.
    const schedules = rows.slice(0, limit).map((row) => (row.name === null || row.name === undefined ? unstoredInfo(statics.get(String(row.listed_name))!) : toScheduleInfo(row)));
    const last = schedules[schedules.length - 1];
    return { schedules, nextCursor: rows.length > limit && last ? last.name : null };
  };

  return {
    async putSchedule(name, input) {
      refuseStatic(name);
      const schedule = parseDynamicSchedule(name, input, registry);
      const [row] = await sql.query(putSchedule({ now: now(), schedule: toScheduleRow(schedule) }));
      return { schedule: toScheduleInfo(row!), created: toBool(row!.created) };
    },
    async deleteSchedule(name) {
      if (!SCHEDULE_NAME.test(name)) return false; // no schedule can have this name
      refuseStatic(name);
      const rows = await sql.query(deleteSchedule({ name }));
      return rows.length > 0;
    },
    listSchedules: list,
    async getSchedule(name) {
      if (!SCHEDULE_NAME.test(name)) return undefined; // no schedule can have this name
      // In byte order a name comes before every longer name it starts: the first listed with it
      // as the prefix is the schedule itself, if there is one.
      const [first] = (await list({ prefix: name, limit: 1 })).schedules;
      return first?.name === name ? first : undefined;
    },
    fireDueSchedules: () => fireDueSchedules({ sql, registry, statics: staticRows, now, log: deps.log, warnOnce: deps.warnOnce }),
  };
}

function toScheduleInfo(row: Row): ScheduleInfo {
  const timing = timingOf(row);
  const enabled = toBool(row.enabled);
  const nextRunAt = !enabled ? null : row.next_run_at ? toDate(row.next_run_at) : safeNext(() => timelineOf(timing, String(row.name)).next(toDate(row.watermark)));
  return {
    name: String(row.name),
    source: row.source as ScheduleInfo['source'],
    cron: timing.cron,
    every: timing.everyMs,
    daily: timing.daily,
    tz: timing.tz,
    task: String(row.task),
    payload: row.payload ?? null,
    enabled,
    catchUp: row.catch_up as CatchUp,
    overlap: row.overlap as Overlap,
    maxFiringsPerTick: Number(row.max_firings_per_tick),
    nextRunAt,
    lastFiredAt: row.last_fired_at ? toDate(row.last_fired_at) : null,
    lastScheduledFor: row.last_scheduled_for ? toDate(row.last_scheduled_for) : null,
    lastJobId: row.last_job_id === null || row.last_job_id === undefined ? null : String(row.last_job_id),
    lastStatus: (row.last_status ?? null) as JobStatus | null,
    state: row.state ?? null,
  };
}

function unstoredInfo(schedule: Schedule): ScheduleInfo {
  return {
    name: schedule.name,
    source: 'static',
    cron: schedule.timing.cron,
    every: schedule.timing.everyMs,
    daily: schedule.timing.daily,
    tz: schedule.timing.tz,
    task: schedule.task,
    payload: schedule.payload,
    enabled: schedule.enabled,
    catchUp: schedule.catchUp,
    overlap: schedule.overlap,
    maxFiringsPerTick: schedule.maxFiringsPerTick,
    nextRunAt: null,
    lastFiredAt: null,
    lastScheduledFor: null,
    lastJobId: null,
    lastStatus: null,
    state: null,
  };
}

/**
 * Milliseconds from the database's clock (`row.now`) to the next instant of a schedule whose next
 * run no tick has stored yet (a row of msUntilNextWork, src/store/wakeup.ts); null when it has
 * none or its timing cannot be computed here (a tick logs that; waking up for it would not help).
 */
export function msUntilFirstRun(row: Row): number | null {
  const next = safeNext(() => timelineOf(timingOf(row), String(row.name)).next(toDate(row.watermark)));
  return next === null ? null : next.getTime() - toDate(row.now).getTime();
}

function safeNext(next: () => Date | null): Date | null {
  try {
    return next();
  } catch {
    return null;
  }
}

/** The JSON shape of a schedule at the HTTP edge: ISO times. */
export function scheduleToJson(schedule: ScheduleInfo) {
  return {
    ...schedule,
    nextRunAt: schedule.nextRunAt?.toISOString() ?? null,
    lastFiredAt: schedule.lastFiredAt?.toISOString() ?? null,
    lastScheduledFor: schedule.lastScheduledFor?.toISOString() ?? null,
  };
}
