/**
 * The wake operations of a Skiplock over its one waker (wake.ts): tick, wake, tickIfDue, and
 * setWakeDriver for the platform entry point that says where the wake state lives; and the hook
 * every write calls (afterWrite). The `idleCheckMs` option is checked here, and the `deployment`
 * option becomes the remote wake (deployment.ts).
 */
import { SkiplockError } from '../../core/errors.ts';
import type { TickResult } from '../../core/types.ts';
import type { DueWork, SkiplockContext } from '../context.ts';
import type { TickOptions } from '../tick/options.ts';
import { createDeploymentWake, type DeploymentOptions } from './deployment.ts';
import { DEFAULT_IDLE_CHECK_MS } from './state.ts';
import { createWaker, type TickIfDueOptions, type TickIfDueResult, type WakeDriver } from './wake.ts';

export interface WakeOptions {
  /** The `wake` option: the platform's driver until setWakeDriver. */
  wake?: WakeDriver;
  /** The `idleCheckMs` option (an integer ≥ 0; TypeError otherwise). */
  idleCheckMs?: number;
  /** The `deployment` option: another deployment woken by this one's writes. */
  deployment?: DeploymentOptions;
}

export interface WakeOperations {
  tick(options?: TickOptions): Promise<TickResult>;
  wake(at?: Date): Promise<void>;
  tickIfDue(options?: TickIfDueOptions): Promise<TickIfDueResult>;
  setWakeDriver(driver: WakeDriver): void;
}

/** `tick`: one tick (tick/runner.ts); `dueInMs`: when the next work is due (next-work.ts). */
export function createWakeOperations(
  { log }: Pick<SkiplockContext, 'log'>,
  options: WakeOptions,
  deps: { tick(options: TickOptions): Promise<TickResult>; dueInMs(options: TickOptions): Promise<number | null> },
): { operations: WakeOperations; afterWrite: DueWork } {
  let driver: WakeDriver = options.wake ?? {};
  const idleCheckMs = options.idleCheckMs ?? DEFAULT_IDLE_CHECK_MS;
  if (!Number.isInteger(idleCheckMs) || idleCheckMs < 0) throw new TypeError(`idleCheckMs must be an integer ≥ 0, got ${String(options.idleCheckMs)}`);
  const remote = options.deployment === undefined ? undefined : createDeploymentWake(options.deployment, log);
  const waker = createWaker({ driver: () => driver, idleCheckMs, log, tick: deps.tick, dueInMs: deps.dueInMs, ...(remote && { remote }) });
  const operations: WakeOperations = {
    // A tick the wake state did not decide concludes into it (wake.ts): what it leaves due is heard.
    tick: (tickOptions) => waker.tick(tickOptions ?? {}),
    wake: (at) => {
      if (at !== undefined && !(at instanceof Date && Number.isFinite(at.getTime())))
        return Promise.reject(new SkiplockError('invalid_request', 'wake: at must be a valid Date', [{ path: ['at'], message: 'must be a valid instant' }]));
      return waker.dueWork(at);
    },
    tickIfDue: waker.tickIfDue,
    setWakeDriver(next) {
      driver = next;
    },
  };
  return { operations, afterWrite: (at) => waker.afterWrite(at) };
}
