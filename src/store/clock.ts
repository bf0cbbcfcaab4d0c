/**
 * One clock: every statement that reads time takes it as `$1`. It is null in production, so the
 * database's own now() is used, and a fixed instant in tests, which pass time in instead of
 * waiting for it. Never compare a JavaScript clock with the database's.
 */

/** The clock parameter: null means the database's own now(). */
export type Clock = Date | null;

/** The SQL for "now", reading `$1`. */
export const NOW = 'coalesce($1::timestamptz, now())';

/** Multiplies a number of milliseconds into an interval: `${NOW} + delay_ms ${MS}`. */
export const MS = "* interval '1 millisecond'";

/** The value of `$1`. */
export function clock(now: Clock): string | null {
  return now ? now.toISOString() : null;
}
