/**
 * The instants of a timing. Pure: the window is always given ((after, until], from the database's
 * watermark and clock), never read from a JS clock.
 *
 * Daylight saving time. Cron instants come from cron-parser walking wall-clock time in the zone,
 * which follows the classic cron rules when it walks *through* a change:
 *   - clocks go forward (Europe/Oslo 2026-03-29, 02:00 → 03:00): a time in the skipped hour
 *     fires once, one hour later by the wall clock (02:30 fires at 03:30 CEST, 01:30 UTC);
 *   - clocks go back (2026-10-25, 03:00 → 02:00): a fixed time in the repeated hour fires once,
 *     at its first occurrence (02:30 CEST, 00:30 UTC); an expression with a wildcard hour fires
 *     in both occurrences, because both are real hours that pass.
 * Started from inside a change, cron-parser answers differently (it would fire the repeated 02:30
 * again, or skip the shifted 03:30), and the watermark can land anywhere. So an iteration that
 * starts within a change's reach is started just before the change instead, and `latest` is
 * checked by walking forward: the instants never depend on where a tick happened to stop.
 */
import { CronExpressionParser, type CronExpression } from 'cron-parser';
import { dailyToCron, type Timing } from './schedule.ts';

export interface Timeline {
  /** The instants in (after, until], in order, at most `limit`. */
  between(after: Date, until: Date, limit: number): Date[];
  /** The latest instant in (after, until], or null. */
  latest(after: Date, until: Date): Date | null;
  /** The first instant after `after`, or null when there is none. */
  next(after: Date): Date | null;
}

/** `name` seeds cron-parser's `H`, so every process computes the same instants. */
export function timelineOf(timing: Timing, name: string): Timeline {
  if (timing.everyMs !== null) return intervalTimeline(timing.everyMs);
  if (timing.cron !== null) return cronTimeline(timing.cron, timing.tz, name);
  return unionTimeline((timing.daily ?? []).map((time) => cronTimeline(dailyToCron(time), timing.tz, name)));
}

/** Every `everyMs`, aligned to the Unix epoch: '15m' fires at :00, :15, :30, :45 UTC. */
function intervalTimeline(everyMs: number): Timeline {
  const after = (t: number) => Math.floor(t / everyMs) * everyMs + everyMs;
  return {
    between(from, until, limit) {
      const instants: Date[] = [];
      for (let t = after(from.getTime()); t <= until.getTime() && instants.length < limit; t += everyMs) instants.push(new Date(t));
      return instants;
    },
    latest(from, until) {
      const t = Math.floor(until.getTime() / everyMs) * everyMs;
      return t > from.getTime() ? new Date(t) : null;
    },
    next: (from) => new Date(after(from.getTime())),
  };
}

/** How far back a change of UTC offset can still make cron-parser answer differently. */
const REACH_MS = 3 * 3_600_000;
/** Skipped instants before `after` when an iteration is rewound: at most 3 h of seconds. */
const MAX_REWOUND = 3 * 3600 + 10;
/** Instants walked by `latest` near an offset change: 6 h of seconds. */
const MAX_WALK = 6 * 3600 + 10;

function cronTimeline(cron: string, tz: string, name: string): Timeline {
  const walk = cronWalk(cron, tz, name);
  return {
    between: (after, until, limit) => cronBetween(walk, after, until, limit),
    latest: (after, until) => cronLatest(walk, after, until),
    next: (after) => walk.instantsAfter(after).next().value ?? null,
  };
}

/** One cron expression's instants in one zone, as cron-parser walks them. */
interface CronWalk {
  tz: string;
  /** cron-parser's iterator from `from`. */
  parse(from: Date): CronExpression;
  /** The instants after `after`, lazily, as a walk from before any nearby offset change yields them. */
  instantsAfter(after: Date): Generator<Date>;
}

function cronWalk(cron: string, tz: string, name: string): CronWalk {
  const parse = (from: Date): CronExpression => CronExpressionParser.parse(cron, { tz, hashSeed: name, currentDate: from });
  const step = (iterator: CronExpression): Date | null => {
    try {
      return iterator.next().toDate();
    } catch {
      return null; // cron-parser found no further instant within its search bound
    }
  };

  function* instantsAfter(after: Date): Generator<Date> {
    const iterator = parse(iterationStart(tz, after));
    let skipped = 0;
    for (let instant = step(iterator); instant; instant = step(iterator)) {
      if (instant > after) yield instant;
      else if (++skipped > MAX_REWOUND) return;
    }
  }

  return { tz, parse, instantsAfter };
}

function cronBetween(walk: CronWalk, after: Date, until: Date, limit: number): Date[] {
  const instants: Date[] = [];
  if (limit <= 0) return instants;
  for (const instant of walk.instantsAfter(after)) {
    if (instant > until) break;
    instants.push(instant);
    if (instants.length >= limit) break;
  }
  return instants;
}

function cronLatest(walk: CronWalk, after: Date, until: Date): Date | null {
  if (until <= after) return null;
  let previous: Date | null;
  try {
    previous = walk.parse(new Date(until.getTime() + 1)).prev().toDate();
  } catch {
    previous = null;
  }
  // Close to `until` and far from any offset change, cron-parser's prev() is the answer.
  const quiet =
    previous !== null &&
    until.getTime() - previous.getTime() <= REACH_MS &&
    offsetMs(walk.tz, new Date(previous.getTime() - REACH_MS)) === offsetMs(walk.tz, until);
  if (quiet) return previous! > after ? previous : null;
  // Otherwise walk forward from a little before prev()'s answer (or from `after`): few instants.
  const from = previous && previous.getTime() - REACH_MS > after.getTime() ? new Date(previous.getTime() - REACH_MS) : after;
  let latest: Date | null = null;
  let walked = 0;
  for (const instant of walk.instantsAfter(from)) {
    if (instant > until) break;
    // Pathological (prev() failed and the window is huge): prev()'s answer is the best there is.
    if (++walked > MAX_WALK) return previous && previous > after ? previous : latest;
    latest = instant;
  }
  return latest;
}

/** Several timelines as one (daily times: one cron expression per time of day). */
function unionTimeline(timelines: Timeline[]): Timeline {
  const sorted = (dates: (Date | null)[]) =>
    [...new Map(dates.filter((d): d is Date => d !== null).map((d) => [d.getTime(), d])).values()].sort((a, b) => a.getTime() - b.getTime());
  return {
    between: (after, until, limit) => sorted(timelines.flatMap((t) => t.between(after, until, limit))).slice(0, limit),
    latest: (after, until) => sorted(timelines.map((t) => t.latest(after, until))).at(-1) ?? null,
    next: (after) => sorted(timelines.map((t) => t.next(after)))[0] ?? null,
  };
}

/**
 * Where a walk to the instants after `after` starts: `after` itself, unless the zone's UTC offset
 * changed shortly before it — then just before that change.
 */
function iterationStart(tz: string, after: Date): Date {
  const now = offsetMs(tz, after);
  let lo = after.getTime() - REACH_MS;
  const before = offsetMs(tz, new Date(lo));
  if (before === now) return after;
  // Bisect to the change, to the second: offset(lo) = before, offset(hi) = now.
  let hi = after.getTime();
  while (hi - lo > 1000) {
    const mid = Math.floor((lo + hi) / 2);
    if (offsetMs(tz, new Date(mid)) === before) lo = mid;
    else hi = mid;
  }
  // Once as much time as the clocks moved has passed since the change, a walk from `after` agrees.
  return after.getTime() - hi > Math.abs(now - before) + 60_000 ? after : new Date(lo);
}

const offsetFormats = new Map<string, Intl.DateTimeFormat>();

/** The zone's UTC offset at `at`, in ms. */
export function offsetMs(tz: string, at: Date): number {
  let format = offsetFormats.get(tz);
  if (!format) {
    format = new Intl.DateTimeFormat('en-US', { timeZone: tz, timeZoneName: 'longOffset' });
    offsetFormats.set(tz, format);
  }
  const name = format.formatToParts(at).find((part) => part.type === 'timeZoneName')?.value ?? 'GMT';
  const match = /^GMT([+-])(\d{2}):(\d{2})(?::(\d{2}))?$/.exec(name);
  if (!match) return 0;
  const [, sign, h, m, s = '0'] = match;
  return (sign === '-' ? -1 : 1) * ((Number(h) * 60 + Number(m)) * 60 + Number(s)) * 1000;
}
