/**
 * When a tick could next do something (skiplock.msUntilNextWork, and the waker's dueInMs): one
 * statement over the queue, the leases, the schedules, retention and pending events, answered in
 * milliseconds; null when there is nothing to wait for. SQL: src/store/wakeup.ts.
 */
import { toBool } from '../../store/rows.ts';
import type { Subscriptions } from '../../store/event-subscriptions.ts';
import { msUntilNextWork } from '../../store/wakeup.ts';
import type { SkiplockContext } from '../context.ts';
import { flowLimits } from '../flow/keys.ts';
import { batchRows } from '../tick/run-batch.ts';
import { msUntilFirstRun } from '../schedules/schedules.ts';
import { TICK_DEFAULTS, type TickOptions } from '../tick/options.ts';

export interface NextWorkDeps {
  /** The `tick` option: the budget and margin a tick has unless it says otherwise. */
  defaults: TickOptions | undefined;
  /** The static schedules by name. */
  staticSchedules: readonly string[];
  /** The next retention pass (operations/maintenance.ts); null without retention. */
  nextRetention(): Parameters<typeof msUntilNextWork>[0]['retention'];
  /** The `on:` subscriptions, whose pending events are due; null without `on:` tasks. */
  subscriptions: Subscriptions | null;
}

export function createNextWork({ sql, now, registry }: Pick<SkiplockContext, 'sql' | 'now' | 'registry'>, deps: NextWorkDeps) {
  return async (options?: TickOptions): Promise<number | null> => {
    const { budgetMs, marginMs } = { ...TICK_DEFAULTS, ...deps.defaults, ...options };
    const rows = await sql.query(
      msUntilNextWork({
        now: now(), tasks: [...registry.keys()], budgetMs: budgetMs - marginMs, schedules: deps.staticSchedules, flowLimits: flowLimits(registry), retention: deps.nextRetention(),
        subscriptions: deps.subscriptions, batches: batchRows(registry),
      }),
    );
    // Work and stored next runs come as one figure; schedules put since the last tick, one row each.
    const ms = rows.map((row) => (toBool(row.uncomputed) ? msUntilFirstRun(row) : row.ms === null || row.ms === undefined ? null : Number(row.ms)));
    return ms.reduce<number | null>((a, b) => (b === null ? a : a === null ? b : Math.min(a, b)), null);
  };
}
