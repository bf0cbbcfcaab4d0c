/**
 * What one tick fires for one schedule, decided from the database's watermark and clock.
 * Pure; the firing statement (src/store/schedules.ts) applies the plan only if the watermark is
 * still the one it was made from, so two ticks that made the same plan cannot both apply it.
 *
 * The watermark: every instant at or before it is settled (fired or skipped). Due instants are
 * those in (watermark, now].
 */
import type { CatchUp, Overlap } from './schedule.ts';
import type { Timeline } from './schedule-timeline.ts';

/** With catchUp 'none', an instant fires only when it is at most this old (one platform cron period). */
export const ON_TIME_MS = 60_000;

export interface FiringPolicy {
  catchUp: CatchUp;
  overlap: Overlap;
  maxFiringsPerTick: number;
}

export interface FiringPlan {
  /** Instants to fire, oldest first. */
  instants: Date[];
  /** The watermark once they fired. */
  advanceTo: Date;
  /** The first instant after advanceTo. */
  nextRunAt: Date | null;
  /** overlap 'skip' and the previous job still live: nothing fires and every due instant is skipped. */
  busyAdvanceTo: Date;
  busyNextRunAt: Date | null;
}

export function planFiring(timeline: Timeline, policy: FiringPolicy, watermark: Date, now: Date): FiringPlan {
  if (now <= watermark) {
    const nextRunAt = timeline.next(watermark);
    return { instants: [], advanceTo: watermark, nextRunAt, busyAdvanceTo: watermark, busyNextRunAt: nextRunAt };
  }
  const nextAfterNow = timeline.next(now);
  const whole = { advanceTo: now, nextRunAt: nextAfterNow, busyAdvanceTo: now, busyNextRunAt: nextAfterNow };

  if (policy.catchUp === 'all') {
    // overlap 'skip': one at a time, so the next one fires only once this one's job has finished.
    const limit = policy.overlap === 'skip' ? 1 : policy.maxFiringsPerTick;
    const due = timeline.between(watermark, now, limit + 1);
    if (due.length <= limit) return { ...whole, instants: due };
    const instants = due.slice(0, limit);
    // The bound was reached: stop at the last fired instant, the rest fire on the next tick.
    return { ...whole, instants, advanceTo: instants.at(-1)!, nextRunAt: due[limit]! };
  }
  const latest = timeline.latest(watermark, now);
  const fires = latest !== null && (policy.catchUp === 'latest' || now.getTime() - latest.getTime() <= ON_TIME_MS);
  return { ...whole, instants: fires ? [latest] : [] };
}
