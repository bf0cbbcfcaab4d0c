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

/**
 * A lease's end: the job's timeout plus a grace, at most `max` (long jobs are heartbeated).
 * `grace` and `max` are the statement's parameters, in ms.
 */
export const leaseUntil = (grace: string, max: string) => `${NOW} + least(j.timeout_ms + ${grace}, ${max}) ${MS}`;

/**
 * A timestamptz as whole milliseconds since 1970 (bigint): what a hot statement returns instead of
 * the timestamp's text. PostgreSQL formats a timestamptz with its time zone rules and a driver
 * parses that text back with a regular expression; for a claimed batch the two were a tenth of the
 * statement's CPU and half the worker's. Exact: truncated like a Date, as the text would be.
 */
export const epochMs = (column: string) => `trunc(extract(epoch FROM ${column}) * 1000)::bigint`;

/** The value of `$1`. */
export function clock(now: Clock): string | null {
  return now ? now.toISOString() : null;
}
