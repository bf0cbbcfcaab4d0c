/**
 * What a schedule is, checked without I/O: its timing (a cron expression, a fixed interval or
 * daily times, in a time zone) and its firing policies. Invalid input yields issues; callers turn
 * them into a TypeError (schedules defined in code) or a SkiplockError (schedules put at run time).
 */
import { CronExpressionParser } from 'cron-parser';
import type { ErrorIssue } from './errors.ts';

export const CATCH_UP_POLICIES = ['all', 'latest', 'none'] as const;
/** What a tick does with instants that passed while no tick ran: see ScheduleOptions.catchUp. */
export type CatchUp = (typeof CATCH_UP_POLICIES)[number];

export const OVERLAP_POLICIES = ['allow', 'skip'] as const;
/** Whether an instant fires while the schedule's previous job is still QUEUED, RUNNING or WAITING. */
export type Overlap = (typeof OVERLAP_POLICIES)[number];

export const SCHEDULE_DEFAULTS = {
  tz: 'UTC',
  catchUp: 'latest',
  overlap: 'allow',
  maxFiringsPerTick: 100,
  enabled: true,
} as const satisfies { tz: string; catchUp: CatchUp; overlap: Overlap; maxFiringsPerTick: number; enabled: boolean };

export const MAX_FIRINGS_PER_TICK = 1000;
const MIN_EVERY_MS = 1000;
const MAX_EVERY_MS = 366 * 24 * 3600 * 1000;
const MAX_DAILY_TIMES = 100;

/** When a schedule fires: exactly one of cron, everyMs, daily is set. */
export interface Timing {
  /** A 5-field (minute) or 6-field (second) cron expression, in cron-parser's syntax. */
  cron: string | null;
  /** A fixed interval in ms, aligned to the Unix epoch (so in UTC, whatever tz says). */
  everyMs: number | null;
  /** Times of day, `HH:MM` or `HH:MM:SS`, sorted, without duplicates. */
  daily: string[] | null;
  /** IANA time zone of cron and daily. */
  tz: string;
}

export interface TimingInput {
  cron?: string | undefined;
  every?: string | number | undefined;
  daily?: readonly string[] | undefined;
  tz?: string | undefined;
}

export const SCHEDULE_NAME = /^[\w.:-]{1,200}$/;

/** Checks a timing completely; `name` seeds cron-parser's `H` so that every process reads the same instants. */
export function parseTiming(input: TimingInput, name: string): { timing: Timing } | { issues: ErrorIssue[] } {
  const issues: ErrorIssue[] = [];
  const given = (['cron', 'every', 'daily'] as const).filter((key) => input[key] !== undefined);
  if (given.length !== 1) {
    const message = given.length === 0 ? 'give one of cron, every, daily' : `give only one of cron, every, daily (got ${given.join(', ')})`;
    return { issues: [{ path: given.length === 0 ? [] : [given[1]!], message }] };
  }
  const tz = input.tz ?? SCHEDULE_DEFAULTS.tz;
  if (input.every !== undefined) {
    if (input.tz !== undefined) issues.push({ path: ['tz'], message: 'every is a fixed interval in absolute time; tz does not apply to it' });
    const everyMs = parseEvery(input.every);
    if (typeof everyMs === 'string') issues.push({ path: ['every'], message: everyMs });
    return issues.length > 0 || typeof everyMs === 'string' ? { issues } : { timing: { cron: null, everyMs, daily: null, tz: 'UTC' } };
  }
  const zoneProblem = checkTimeZone(tz);
  if (zoneProblem) issues.push({ path: ['tz'], message: zoneProblem });
  if (input.cron !== undefined) {
    const cron = input.cron.trim().replace(/\s+/g, ' ');
    const problem = checkCron(cron, zoneProblem ? 'UTC' : tz, name);
    if (problem) issues.push({ path: ['cron'], message: problem });
    return issues.length > 0 ? { issues } : { timing: { cron, everyMs: null, daily: null, tz } };
  }
  const daily = parseDaily(input.daily ?? []);
  if (typeof daily === 'string') issues.push({ path: ['daily'], message: daily });
  return issues.length > 0 || typeof daily === 'string' ? { issues } : { timing: { cron: null, everyMs: null, daily, tz } };
}

/** Why `tz` is not an IANA time zone this runtime knows, or undefined when it is. */
export function checkTimeZone(tz: string): string | undefined {
  if (tz.length === 0 || tz.length > 100) return 'must be an IANA time zone such as Europe/Oslo';
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: tz });
  } catch {
    return `unknown time zone ${JSON.stringify(tz)}: use an IANA name such as Europe/Oslo or America/New_York`;
  }
  return undefined;
}

/**
 * Why `cron` is not a usable 5- or 6-field expression (or an @alias such as @hourly), or
 * undefined. cron-parser alone accepts too much (an empty string, four fields), hence the count.
 */
export function checkCron(cron: string, tz: string, name: string): string | undefined {
  const fields = cron.split(' ');
  if (cron.length > 200) return 'must be at most 200 characters';
  if (!cron.startsWith('@') && fields.length !== 5 && fields.length !== 6)
    return `must have 5 fields (minute hour day-of-month month day-of-week) or 6 (with seconds first), got ${cron === '' ? 0 : fields.length}`;
  try {
    CronExpressionParser.parse(cron, { tz, hashSeed: name, currentDate: new Date(Date.UTC(2000, 0, 1)) }).next();
  } catch (error) {
    return `invalid cron expression ${JSON.stringify(cron)}: ${error instanceof Error ? error.message : String(error)}`;
  }
  return undefined;
}

const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** '15m', '1h30m', '90s', '1d' or a number of ms → ms; a string says what is wrong. */
export function parseEvery(every: string | number): number | string {
  let ms: number;
  if (typeof every === 'number') ms = every;
  else {
    const text = every.trim();
    if (!/^(\d+(ms|s|m|h|d))+$/.test(text)) return `must be a duration such as '30s', '15m', '1h30m' or '1d', or a number of ms`;
    ms = 0;
    for (const [, amount, unit] of text.matchAll(/(\d+)(ms|s|m|h|d)/g)) ms += Number(amount) * UNIT_MS[unit!]!;
  }
  if (!Number.isInteger(ms) || ms < MIN_EVERY_MS || ms > MAX_EVERY_MS) return `must be a whole number of ms from ${MIN_EVERY_MS} (1 s) to ${MAX_EVERY_MS} (366 days)`;
  return ms;
}

/** ['14:00', '02:30'] → ['02:30', '14:00']; a string says what is wrong. */
export function parseDaily(times: readonly string[]): string[] | string {
  if (times.length === 0 || times.length > MAX_DAILY_TIMES) return `must list 1 to ${MAX_DAILY_TIMES} times of day`;
  for (const time of times) {
    if (typeof time !== 'string' || !/^([01]\d|2[0-3]):[0-5]\d(:[0-5]\d)?$/.test(time)) return `${JSON.stringify(time)} is not a time of day HH:MM or HH:MM:SS (00:00 to 23:59:59)`;
  }
  return [...new Set(times.map((t) => (t.length === 5 ? t : t.endsWith(':00') ? t.slice(0, 5) : t)))].sort();
}

/** A daily time as a 6-field cron expression: '02:30' → '0 30 2 * * *'. */
export function dailyToCron(time: string): string {
  const [h, m, s = '0'] = time.split(':');
  return `${Number(s)} ${Number(m)} ${Number(h)} * * *`;
}
