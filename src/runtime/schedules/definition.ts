/**
 * Schedule definitions: static ones (defineSchedule, in code) and dynamic ones (putSchedule, at
 * run time) go through the same checks. Errors differ only in kind, as for tasks and jobs: a bad
 * definition in code is a programming error and throws a TypeError at startup; a bad dynamic
 * schedule is bad input and throws a SkiplockError (invalid_request, unknown_task,
 * invalid_payload), which the HTTP API maps to 400.
 */
import * as z from 'zod';
import { SkiplockError, type ErrorIssue } from '../../core/errors.ts';
import {
  CATCH_UP_POLICIES,
  MAX_FIRINGS_PER_TICK,
  OVERLAP_POLICIES,
  SCHEDULE_DEFAULTS,
  SCHEDULE_NAME,
  parseTiming,
  type CatchUp,
  type Overlap,
  type Timing,
} from '../../core/schedule.ts';
import type { ScheduleRowInput } from '../../store/schedules.ts';
import { checkTaskPayload, payloadMessage, toIssues } from '../tasks/enqueue.ts';
import { requireTask, type Task, type TaskRegistry } from '../tasks/task.ts';

/** A schedule's options, as code and the HTTP API (`PUT /v1/schedules/:name`) give them. */
export const scheduleInputSchema = z
  .strictObject({
    /**
     * A cron expression with 5 fields (minute hour day-of-month month day-of-week) or 6 (seconds
     * first), in cron-parser's syntax: day-of-week 0–7 with 0 and 7 = Sunday (Cloudflare's own
     * cron triggers number 1–7 with 1 = Sunday; skiplock does not). `H` picks a value hashed from
     * the schedule's name. Give exactly one of cron, every, daily.
     */
    cron: z.string().max(200).optional(),
    /** A fixed interval: '30s', '15m', '1h30m', '1d', or ms (≥ 1000). Aligned to the Unix epoch in UTC. */
    every: z.union([z.string().max(50), z.number()]).optional(),
    /** Times of day, 'HH:MM' or 'HH:MM:SS', in tz: ['02:30', '14:00']. */
    daily: z.array(z.string().max(8)).max(100).optional(),
    /** IANA time zone of cron and daily. Default 'UTC'. */
    tz: z.string().max(100).optional(),
    /** The task each firing enqueues. */
    task: z.string().min(1).max(200),
    /** Its payload, checked against the task's schema now. Default {}. */
    payload: z.unknown().optional(),
    /**
     * Instants that passed while no tick ran: 'all' fires each of them (at most
     * maxFiringsPerTick per tick, the rest on the next ticks), 'latest' fires only the most
     * recent one, 'none' fires only an instant at most a minute old. Default 'latest'.
     */
    catchUp: z.enum(CATCH_UP_POLICIES).optional(),
    /**
     * 'skip': an instant does not fire while a job of this schedule is still live: QUEUED (sleeping
     * included), RUNNING or WAITING for its children
     * (and with catchUp 'all', missed instants fire one per tick). Default 'allow'.
     */
    overlap: z.enum(OVERLAP_POLICIES).optional(),
    /** At most this many firings of this schedule per tick (catchUp 'all'). Default 100. */
    maxFiringsPerTick: z.number().int().min(1).max(MAX_FIRINGS_PER_TICK).optional(),
    /** A disabled schedule fires nothing; re-enabled, it starts from then (no catch-up). Default true. */
    enabled: z.boolean().optional(),
  });

export type ScheduleInput = z.input<typeof scheduleInputSchema>;

/** A static schedule: the options above, a name, and the task as a name or its definition. */
export type ScheduleDefinition = Omit<ScheduleInput, 'task'> & {
  /** Unique name: 1–200 of [A-Za-z0-9_.:-]. */
  name: string;
  /** The task, by name or as defined by defineTask (then the payload is checked right away). */
  task: string | Task;
};

/** A checked definition, static or dynamic. */
export interface Schedule {
  readonly name: string;
  readonly timing: Timing;
  readonly task: string;
  readonly payload: unknown;
  readonly catchUp: CatchUp;
  readonly overlap: Overlap;
  readonly maxFiringsPerTick: number;
  readonly enabled: boolean;
}

/** Declares a static schedule; a bad definition throws a TypeError now, at startup. */
export function defineSchedule(definition: ScheduleDefinition): Schedule {
  const { name, task, ...options } = definition;
  if (typeof name !== 'string' || !SCHEDULE_NAME.test(name)) throw new TypeError(`schedule name ${JSON.stringify(name)} must be 1–200 of [A-Za-z0-9_.:-]`);
  const taskName = typeof task === 'string' ? task : task?.name;
  const checked = checkSchedule(name, { ...options, task: taskName });
  if ('issues' in checked) throw definitionError(name, checked.issues);
  if (typeof task !== 'string') {
    const payload = checkTaskPayload(task, checked.schedule.payload, ['payload']);
    if ('issues' in payload) throw definitionError(name, payload.issues);
    return { ...checked.schedule, payload: payload.stored };
  }
  return checked.schedule;
}

/** Checks a static schedule against the tasks of this deployment (TypeError when it does not fit). */
export function bindStaticSchedule(schedule: Schedule, registry: TaskRegistry): Schedule {
  const task = registry.get(schedule.task);
  if (!task) throw new TypeError(`schedule ${schedule.name}: unknown task ${JSON.stringify(schedule.task)}; add it to createSkiplock({ tasks })`);
  const payload = checkTaskPayload(task, schedule.payload, ['payload']);
  if ('issues' in payload) throw definitionError(schedule.name, payload.issues);
  return { ...schedule, payload: payload.stored };
}

/** Checks a dynamic schedule completely (name, options, task, payload); SkiplockError on bad input. */
export function parseDynamicSchedule(name: string, input: unknown, registry: TaskRegistry): Schedule {
  if (typeof name !== 'string' || !SCHEDULE_NAME.test(name))
    throw new SkiplockError('invalid_request', 'invalid schedule name', [{ path: ['name'], message: 'must be 1–200 of [A-Za-z0-9_.:-]' }]);
  const checked = checkSchedule(name, input);
  if ('issues' in checked) throw new SkiplockError('invalid_request', `invalid schedule ${name}`, checked.issues);
  const task = requireTask(registry, checked.schedule.task);
  const payload = checkTaskPayload(task, checked.schedule.payload, ['payload']);
  if ('issues' in payload) throw new SkiplockError('invalid_payload', payloadMessage(task, payload), payload.issues);
  return { ...checked.schedule, payload: payload.stored };
}

function checkSchedule(name: string, input: unknown): { schedule: Schedule } | { issues: ErrorIssue[] } {
  const parsed = scheduleInputSchema.safeParse(input);
  if (!parsed.success) return { issues: toIssues(parsed.error) };
  const options = parsed.data;
  const timing = parseTiming(options, name);
  if ('issues' in timing) return timing;
  return {
    schedule: {
      name,
      timing: timing.timing,
      task: options.task,
      payload: options.payload ?? {},
      catchUp: options.catchUp ?? SCHEDULE_DEFAULTS.catchUp,
      overlap: options.overlap ?? SCHEDULE_DEFAULTS.overlap,
      maxFiringsPerTick: options.maxFiringsPerTick ?? SCHEDULE_DEFAULTS.maxFiringsPerTick,
      enabled: options.enabled ?? SCHEDULE_DEFAULTS.enabled,
    },
  };
}

function definitionError(name: string, issues: ErrorIssue[]): TypeError {
  const details = issues.map((issue) => `${issue.path.join('.') || '(schedule)'}: ${issue.message}`).join('; ');
  return new TypeError(`schedule ${name}: ${details}`);
}

/** The row that stores a definition. */
export function toScheduleRow(schedule: Schedule): ScheduleRowInput {
  return {
    name: schedule.name,
    cron: schedule.timing.cron,
    every_ms: schedule.timing.everyMs,
    daily: schedule.timing.daily,
    tz: schedule.timing.tz,
    task: schedule.task,
    payload: schedule.payload,
    enabled: schedule.enabled,
    catch_up: schedule.catchUp,
    overlap: schedule.overlap,
    max_firings_per_tick: schedule.maxFiringsPerTick,
  };
}
