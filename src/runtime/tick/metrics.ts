/**
 * Totals of every tick this isolate ran (cron, alarm, HTTP, timer), for /metrics. They live in
 * memory and start at zero with each isolate or process; Prometheus counters are meant to reset
 * like that. Gauges (jobs by status, queue lag) come from the database instead.
 */
import { emptyTickResult, type TickResult } from '../../core/types.ts';

/** Upper bounds of the tick-duration histogram, in seconds. */
export const TICK_DURATION_BUCKETS = [0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300] as const;

export interface TickTotals extends TickResult {
  /** Ticks that returned. */
  ticks: number;
  /** Ticks that threw (a tick normally absorbs database errors, so this stays near 0). */
  failedTicks: number;
  /** Sum of tick durations in seconds. */
  durationSecondsSum: number;
  /** Per TICK_DURATION_BUCKETS entry: ticks that took at most that long (cumulative). */
  durationBuckets: number[];
  /**
   * How long ago this instance's last tick ended, in ms (a monotonic clock); null when it has run
   * none. Nothing records ticks in the database: other instances' ticks are not known here.
   */
  lastTickMsAgo: number | null;
}

export interface TickMetrics {
  /** Runs one tick and adds what it did to the totals. */
  measure(run: () => Promise<TickResult>): Promise<TickResult>;
  /** A copy of the totals. */
  totals(): TickTotals;
}

export function createTickMetrics(): TickMetrics {
  const totals: Omit<TickTotals, 'lastTickMsAgo'> = {
    ...emptyTickResult(),
    ticks: 0, failedTicks: 0, durationSecondsSum: 0, durationBuckets: TICK_DURATION_BUCKETS.map(() => 0),
  };
  let lastEnded: number | undefined;
  // Every counter of a TickResult, so one added there is counted here too.
  const counted = Object.keys(emptyTickResult()) as (keyof TickResult)[];

  const observe = (seconds: number) => {
    totals.durationSecondsSum += seconds;
    TICK_DURATION_BUCKETS.forEach((bound, i) => {
      if (seconds <= bound) totals.durationBuckets[i]! += 1;
    });
  };

  return {
    async measure(run) {
      const started = performance.now();
      try {
        const result = await run();
        totals.ticks += 1;
        for (const key of counted) totals[key] += result[key];
        return result;
      } catch (error) {
        totals.failedTicks += 1;
        throw error;
      } finally {
        lastEnded = performance.now();
        observe((lastEnded - started) / 1000);
      }
    },
    totals: () => ({ ...totals, durationBuckets: [...totals.durationBuckets], lastTickMsAgo: lastEnded === undefined ? null : performance.now() - lastEnded }),
  };
}
