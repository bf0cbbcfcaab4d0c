/**
 * What deserves a person's attention, decided in one place so that every page colours alike:
 * a queue whose oldest due job waits too long, and a schedule that stopped firing or whose last
 * run died. (DEAD jobs need no rule: there should be none.)
 */
import type { ScheduleInfo } from '../../runtime/schedules/index.ts';
import { formatDuration } from './format.ts';

export type Tone = 'ok' | 'warn' | 'bad' | 'muted';

/**
 * Thresholds on the oldest due QUEUED job's wait. A minute's cron tick alone can leave a job
 * waiting about a minute, so only longer waits count: warn after 2 min, bad after 10 min.
 */
export const QUEUE_LAG_MS = { warn: 2 * 60_000, bad: 10 * 60_000 } as const;

/**
 * A schedule whose next run is this far in the past has not been fired: no tick is running (a
 * tick fires due schedules first, at least once a minute). Default 3 min.
 */
export const SCHEDULE_OVERDUE_MS = 3 * 60_000;

export function queueLagTone(oldestQueuedAgeMs: number): Tone {
  if (oldestQueuedAgeMs >= QUEUE_LAG_MS.bad) return 'bad';
  if (oldestQueuedAgeMs >= QUEUE_LAG_MS.warn) return 'warn';
  return 'ok';
}

export interface ScheduleHealth {
  tone: Tone;
  /** A word or two for a badge. */
  label: string;
  /** A sentence for the overview's alerts, for the warn and bad tones. */
  reason?: string;
  /** Its next run is past SCHEDULE_OVERDUE_MS. */
  overdue?: boolean;
}

export function scheduleHealth(schedule: ScheduleInfo, now: number): ScheduleHealth {
  if (!schedule.enabled) return { tone: 'muted', label: 'disabled' };
  const overdueMs = schedule.nextRunAt ? now - schedule.nextRunAt.getTime() : 0;
  if (overdueMs > SCHEDULE_OVERDUE_MS)
    return { tone: 'bad', label: 'silent', reason: `was due ${formatDuration(overdueMs)} ago and has not fired: is anything ticking?`, overdue: true };
  if (schedule.lastStatus === 'DEAD') return { tone: 'bad', label: 'last run dead', reason: `its last run (job #${schedule.lastJobId}) is DEAD.` };
  if (!schedule.lastFiredAt) return { tone: 'muted', label: 'not fired yet' };
  return { tone: 'ok', label: 'on time' };
}
