/**
 * The pieces of the event race tests (events-race, wait-for-any): a driver that loses a share of
 * its statements, instances ticking until stopped, sends retried until stored, and waiting until
 * every job is DONE.
 */
import type { Sql } from '../../src/store/sql.ts';
import { statement } from '../../src/store/sql.ts';

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Fails a share of statements, as a connection lost mid-tick does (the statement may or may not have run). */
export function flaky(sql: Sql, share: number): Sql {
  const maybe = async <T>(run: () => Promise<T>): Promise<T> => {
    if (Math.random() < share / 2) throw new Error('connection lost (before)');
    const result = await run();
    if (Math.random() < share / 2) throw new Error('connection lost (after)');
    return result;
  };
  return { query: (s) => maybe(() => sql.query(s)), batch: (s) => maybe(() => sql.batch(s)), close: async () => {} };
}

interface Ticking {
  tick(options: { budgetMs: number; concurrency: number; pollIntervalMs: number }): Promise<unknown>;
}

/** Each instance ticks in a loop (a failed tick waits 20 ms) until `stop()`, which waits for them. */
export function tickUntilStopped(instances: readonly Ticking[]): { stop(): Promise<void> } {
  let stopped = false;
  const loops = instances.map(async (s) => {
    while (!stopped) await s.tick({ budgetMs: 4_000, concurrency: 20, pollIntervalMs: 10 }).catch(() => sleep(20));
  });
  return {
    async stop() {
      stopped = true;
      await Promise.all(loops);
    },
  };
}

/** Sends until one attempt answers (a send is idempotent by its key, so a retry stores nothing twice). */
export async function untilSent<T>(send: () => Promise<T>): Promise<T> {
  for (;;) {
    try {
      return await send();
    } catch {
      await sleep(10);
    }
  }
}

/** Polls until `count` jobs are DONE or the time is up (the test's assertions then say which are not). */
export async function untilAllDone(sql: Sql, count: number, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const [row] = await sql.query(statement(`SELECT count(*) FILTER (WHERE status = 'DONE')::int AS done FROM skiplock.job`));
    if (row!.done === count || Date.now() > deadline) return;
    await sleep(200);
  }
}
