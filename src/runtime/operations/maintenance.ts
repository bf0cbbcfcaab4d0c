/**
 * The queue's upkeep: reaping (RUNNING jobs whose lease expired go back to the queue) and
 * retention (deleting finished jobs and old events past their age), with retention's defaults in
 * one place. Ticks prune by themselves, at most once a minute per process (housekeeping), and the
 * wake state counts the next pass among what is due (nextRetention). SQL: src/store/leases.ts and
 * retention.ts.
 */
import { reapExpiredLeases } from '../../store/leases.ts';
import { pruneFinishedJobs } from '../../store/retention.ts';
import type { SkiplockContext } from '../context.ts';
import { EVENT_LIMITS } from '../events/events.ts';

export interface RetentionOptions {
  /** Delete DONE jobs finished longer ago than this (ms). Default 7 days. */
  doneMs?: number;
  /** Delete CANCELLED jobs finished longer ago than this (ms). Default 7 days. */
  cancelledMs?: number;
  /** Delete DEAD jobs older than this (ms); null keeps them until a person acts. Default null. */
  deadMs?: number | null;
  /** At most this many rows per call. Default 10 000. */
  limit?: number;
  /** Delete events stored longer ago than this (ms); waits match only events still kept. Default 7 days. */
  eventsMs?: number;
}

const DAY_MS = 24 * 3600 * 1000;
/** Ticks prune finished jobs at most this often per process. */
const PRUNE_INTERVAL_MS = 60_000;

/** What prune() deletes next, for the wake state (store/wakeup.ts): the ages, and how long the rate limit still holds it back. */
export interface RetentionWake {
  doneMs: number;
  cancelledMs: number;
  deadMs: number | null;
  retentionWaitMs: number;
}

export interface Maintenance {
  /** Returns RUNNING jobs whose lease expired to the queue (due now); resolves to how many. */
  reap(): Promise<number>;
  /** Deletes finished jobs past their retention; resolves to how many. */
  prune(options?: RetentionOptions): Promise<number>;
  /** The ticks' upkeep: a prune when the last is a minute old (true when it ran); undefined with `retention: false`. */
  housekeeping: (() => Promise<boolean>) | undefined;
  /** The next retention pass, for the wake state; null with `retention: false`. */
  nextRetention(): RetentionWake | null;
}

/** `retention`: the option of that name (undefined: the defaults; false: no pruning by ticks). */
export function createMaintenance(ctx: Pick<SkiplockContext, 'sql' | 'now' | 'after'>, retention: RetentionOptions | false | undefined): Maintenance {
  const { sql, now } = ctx;
  const prune = async (options: RetentionOptions = {}) => {
    const [row] = await sql.query(
      pruneFinishedJobs({
        now: now(),
        doneMs: options.doneMs ?? 7 * DAY_MS,
        cancelledMs: options.cancelledMs ?? 7 * DAY_MS,
        deadMs: options.deadMs ?? null,
        limit: options.limit ?? 10_000,
        eventsMs: options.eventsMs ?? EVENT_LIMITS.retentionMs,
      }),
    );
    return Number(row?.deleted ?? 0) + Number(row?.deleted_events ?? 0);
  };
  // Retention by the ticks themselves, at most once a minute per process: serverless deployments
  // run nothing else. (A local rate limit only; the ages are measured in SQL.)
  let lastPrune = -Infinity;
  return {
    // Reaped jobs are due now (run_at = now()).
    async reap() {
      const [row] = await sql.query(reapExpiredLeases({ now: now(), limit: 10_000 }));
      return ctx.after(Number(row?.reaped ?? 0), (n) => (n > 0 ? undefined : null));
    },
    prune,
    housekeeping:
      retention === false
        ? undefined
        : async () => {
            if (performance.now() - lastPrune < PRUNE_INTERVAL_MS) return false;
            lastPrune = performance.now();
            await prune(retention);
            return true;
          },
    // What prune() deletes, not before the rate limit allows.
    nextRetention: () =>
      retention === false
        ? null
        : {
            doneMs: retention?.doneMs ?? 7 * DAY_MS,
            cancelledMs: retention?.cancelledMs ?? 7 * DAY_MS,
            deadMs: retention?.deadMs ?? null,
            retentionWaitMs: Math.max(0, Math.ceil(lastPrune + PRUNE_INTERVAL_MS - performance.now())),
          },
  };
}
