/**
 * Neon's scale-to-zero rule, replayed over the instants at which a deployment sent statements: a
 * compute starts at a statement (if suspended) and stays active until `suspendAfterMs` (5 min by
 * default) after the last one. Compute-hours are active hours × the compute's size in CU.
 */
export interface NeonRule {
  /** Idle time before the compute suspends. Neon's default (and Free's fixed value): 5 minutes. */
  suspendAfterMs: number;
  /** Compute size in CU. 0.25 is the smallest, Free's default. */
  cu: number;
}

export const NEON_DEFAULT_RULE: NeonRule = { suspendAfterMs: 5 * 60_000, cu: 0.25 };

export interface ComputeUse {
  statements: number;
  /** Time the compute was active (ms). */
  activeMs: number;
  /** How many times it started from suspended (each is a cold start for the statement that woke it). */
  starts: number;
  /** activeMs in hours × cu. */
  cuHours: number;
}

/**
 * Replays `times` (epoch ms, any order) within [from, to): the compute is active from each
 * statement until suspendAfterMs after the last, cut at `to` (what runs over belongs to the
 * next period).
 */
export function computeUse(times: readonly number[], from: number, to: number, rule: NeonRule = NEON_DEFAULT_RULE): ComputeUse {
  const sorted = times.filter((t) => t >= from && t < to).sort((a, b) => a - b);
  let activeMs = 0;
  let starts = 0;
  let activeUntil = -Infinity;
  let periodStart = 0;
  for (const t of sorted) {
    if (t > activeUntil) {
      if (activeUntil > -Infinity) activeMs += activeUntil - periodStart;
      periodStart = t;
      starts += 1;
    }
    activeUntil = Math.max(activeUntil, t + rule.suspendAfterMs);
  }
  if (activeUntil > -Infinity) activeMs += Math.min(activeUntil, to) - periodStart;
  return { statements: sorted.length, activeMs, starts, cuHours: (activeMs / 3_600_000) * rule.cu };
}

/** Hours in Neon's billing month (365 × 24 / 12). */
export const HOURS_PER_MONTH = 730;

/** A day's use, as a month of identical days. */
export function perMonth(day: ComputeUse): ComputeUse {
  const k = HOURS_PER_MONTH / 24;
  return { statements: Math.round(day.statements * k), activeMs: day.activeMs * k, starts: Math.round(day.starts * k), cuHours: day.cuHours * k };
}
