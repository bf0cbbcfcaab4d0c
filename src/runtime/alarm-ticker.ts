/**
 * One wake-up of a self-scheduling ticker (the Cloudflare Durable Object's alarm): tick until
 * idle, then say when to wake up next — in a second while jobs are due or running anywhere, else
 * at the next due job or the next instant of a schedule this deployment fires, whichever comes
 * first; never when neither exists (an enqueue wakes it again, and so does the minute cron, which
 * is how a schedule put between two wake-ups is seen).
 */
import type { TickResult } from '../core/types.ts';
import type { Skiplock } from './skiplock.ts';
import type { TickOptions } from './tick.ts';

export interface AlarmTickResult {
  result: TickResult;
  /** Milliseconds until the next wake-up, or null to sleep until woken. */
  nextInMs: number | null;
}

/** The shortest gap between two alarms: a busy queue is ticked every second. */
export const ALARM_INTERVAL_MS = 1_000;

export async function tickAndPlanNext(skiplock: Skiplock, options: TickOptions): Promise<AlarmTickResult> {
  const result = await skiplock.tick({ ...options, untilIdle: true });
  const ms = await skiplock.msUntilNextWork(options);
  return { result, nextInMs: ms === null ? null : Math.max(ALARM_INTERVAL_MS, ms) };
}
