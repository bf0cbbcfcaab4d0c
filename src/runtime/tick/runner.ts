/**
 * The ticks of one Skiplock instance: the tick's dependencies (tick.ts, TickDeps) built once — a
 * log that says "not migrated" once per instance instead of at every poll, the schedules fired
 * before claiming, the registration of this deployment's tasks, the events it dispatches,
 * retention as upkeep, tracing — and what every tick of the isolate did so far (metrics.ts).
 */
import type { TickResult } from '../../core/types.ts';
import { isNotMigratedText } from '../../store/schema.ts';
import type { SkiplockContext } from '../context.ts';
import type { Logger } from '../observability/log.ts';
import { isNotMigrated } from '../operations/schema-check.ts';
import { createTickMetrics, type TickTotals } from './metrics.ts';
import type { TickDeps, TickOptions } from './options.ts';
import { tick } from './tick.ts';

export interface TickRunnerDeps {
  /** The `tick` option: defaults for every tick, overridable per call. */
  defaults: TickOptions | undefined;
  /** What a handler's ctx reaches: the registry, ctx.enqueue, the callback signer. */
  run: TickDeps['run'];
  /**
   * The static schedules by name, and firing the due ones (fireDueSchedules without the hook: a
   * tick concludes into the wake state by itself).
   */
  schedules: { names: readonly string[]; fireDue(): Promise<number> };
  registration: NonNullable<TickDeps['registration']>;
  events: TickDeps['events'];
  housekeeping: TickDeps['housekeeping'];
}

export interface TickRunner {
  /** One tick with these options over the defaults; counted in the totals. */
  run(options?: TickOptions): Promise<TickResult>;
  /** What every tick of this isolate did so far, for /metrics. */
  totals(): TickTotals;
}

export function createTickRunner(ctx: SkiplockContext, deps: TickRunnerDeps): TickRunner {
  const { sql, now, warnOnce } = ctx;
  const tickMetrics = createTickMetrics();
  const notMigrated = notMigratedOnce(ctx.log);
  // Whether a tick of this instance has read (and so written the static definitions of) the schedules.
  let schedulesRead = false;
  const beforeClaim = async () => {
    const fired = await deps.schedules.fireDue();
    schedulesRead = true;
    return fired;
  };
  const run = async (options?: TickOptions) => {
    const tickDeps: TickDeps = {
      sql, now, log: notMigrated.log, warnOnce, run: deps.run, beforeClaim, staticSchedules: deps.schedules.names, schedulesRead: () => schedulesRead,
      housekeeping: deps.housekeeping, tracing: await ctx.tracing(), registration: deps.registration, ...(deps.events && { events: deps.events }),
    };
    try {
      return await tickMetrics.measure(() => tick(tickDeps, { ...deps.defaults, ...options }));
    } catch (error) {
      if (isNotMigrated(error)) notMigrated.say((error as Error).message);
      throw error;
    }
  };
  return { run, totals: tickMetrics.totals };
}

/** An unmigrated database fails every poll of every tick the same way: said once per instance. */
function notMigratedOnce(log: Logger): { say(text: string): boolean; log: Logger } {
  let said = false;
  const say = (text: string) => {
    if (said) return false;
    said = true;
    log('error', text);
    return true;
  };
  return {
    say,
    log: (level, message, fields) => {
      const error = fields?.error;
      if (typeof error === 'string' && isNotMigratedText(error)) say(error.replace(/^SkiplockError: /, ''));
      else log(level, message, fields);
    },
  };
}
