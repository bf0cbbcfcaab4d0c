/**
 * Fair share as it stands (docs/flow-control.md, "Fair share"), for people: per priority level the
 * lanes taking turns and where the next claim starts, and the keys with the most due jobs.
 * Reads only; see src/store/fairness.ts.
 */
import type { Clock } from '../../store/clock.ts';
import { fairnessStatus } from '../../store/fairness.ts';
import { toBool, toDateOrNull } from '../../store/rows.ts';
import type { Sql } from '../../store/sql.ts';

export interface FairLevel {
  priority: number;
  /** Lanes with a due job: one per key, and one for the jobs without a key when they have one due. */
  lanes: number;
  /** Due jobs with a fairness key at this level. */
  due: number;
  /** The lane the level's last claim stopped after (null: the jobs without a key); undefined: no claim yet. */
  cursor?: string | null;
}

export interface FairKey {
  priority: number;
  key: string;
  /** Its due jobs at this level, the oldest due since `oldestDueAt`. */
  due: number;
  oldestDueAt: Date;
  /** Its RUNNING jobs (any level). */
  running: number;
}

export interface FairnessStatus {
  /** The levels with a due fair job, highest first. */
  levels: FairLevel[];
  /** The keys with the most due jobs (at most 50). */
  keys: FairKey[];
}

export interface FairnessOperations {
  /** Fair share as it stands: the lanes per level, the cursor, the keys with the most due jobs. */
  fairnessStatus(): Promise<FairnessStatus>;
}

export const FAIR_KEYS_LISTED = 50;

export function createFairnessOperations(sql: Sql, now: () => Clock): FairnessOperations {
  return {
    async fairnessStatus() {
      const status: FairnessStatus = { levels: [], keys: [] };
      for (const row of await sql.query(fairnessStatus({ now: now(), keys: FAIR_KEYS_LISTED }))) {
        if (row.kind === 'level') {
          status.levels.push({
            priority: Number(row.priority), lanes: Number(row.lanes), due: Number(row.due),
            ...(toBool(row.has_cursor) ? { cursor: row.cursor === null ? null : String(row.cursor) } : {}),
          });
        } else {
          status.keys.push({ priority: Number(row.priority), key: String(row.key), due: Number(row.due), oldestDueAt: toDateOrNull(row.oldest)!, running: Number(row.running) });
        }
      }
      status.levels.sort((a, b) => b.priority - a.priority);
      status.keys.sort((a, b) => b.due - a.due || (a.key < b.key ? -1 : a.key > b.key ? 1 : b.priority - a.priority));
      return status;
    },
  };
}
