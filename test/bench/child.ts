/**
 * Runs one measurement in a process of its own, so that no system's timers, pools or garbage
 * weigh on the next one, and memory figures are this run's alone. The runner forks this file,
 * sends `{ task, params }` and gets back `{ result }` or `{ error }`.
 */
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { claimLatency } from './claim-latency.ts';
import { graphileLatency, graphileThroughput } from './graphile-worker.ts';
import { pgBossLatency, pgBossThroughput } from './pg-boss.ts';
import { rawSqlThroughput } from './raw-sql.ts';
import { skiplockLatency, skiplockThroughput, skiplockTickMemory } from './skiplock.ts';

const TASKS = {
  skiplockThroughput,
  skiplockLatency,
  skiplockTickMemory,
  rawSqlThroughput,
  pgBossThroughput,
  pgBossLatency,
  graphileThroughput,
  graphileLatency,
  claimLatency,
} as const;

export type TaskName = keyof typeof TASKS;
type ParamsOf<T extends TaskName> = Parameters<(typeof TASKS)[T]>[0];
type ResultOf<T extends TaskName> = Awaited<ReturnType<(typeof TASKS)[T]>>;

const SELF = fileURLToPath(import.meta.url);

/**
 * Forks a child process for one task and resolves with its result. `childFile`: another tree's
 * test/bench/child.ts (the A/B comparison, ab.ts), which speaks the same protocol.
 */
export function runInChild<T extends TaskName>(task: T, params: ParamsOf<T>, childFile = SELF, env?: Record<string, string>): Promise<ResultOf<T>> {
  return new Promise((resolve, reject) => {
    const child = fork(childFile, [], {
      ...(env ? { env: { ...process.env, ...env } } : {}),
      execArgv: ['--experimental-strip-types', '--no-warnings', '--expose-gc', ...(process.env.BENCH_CHILD_FLAGS?.split(' ').filter(Boolean) ?? [])],
      serialization: 'advanced',
    });
    let settled = false;
    child.on('message', (message: { result?: ResultOf<T>; error?: string }) => {
      settled = true;
      if (message.error) reject(new Error(`${task}: ${message.error}`));
      else resolve(message.result as ResultOf<T>);
    });
    child.on('exit', (code) => {
      if (!settled) reject(new Error(`${task}: child exited with code ${code} before answering`));
    });
    child.send({ task, params });
  });
}

if (process.argv[1] === SELF && process.send) {
  process.once('message', async ({ task, params }: { task: TaskName; params: never }) => {
    try {
      const result = await (TASKS[task] as (p: never) => Promise<unknown>)(params);
      process.send!({ result }, () => process.exit(0));
    } catch (error) {
      process.send!({ error: error instanceof Error ? (error.stack ?? error.message) : String(error) }, () => process.exit(1));
    }
  });
}
