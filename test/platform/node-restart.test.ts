/**
 * The Node runner through a PostgreSQL restart, on a server of its own (the suite's shared one
 * cannot be restarted): a job that falls due while the server is down is claimed by the first
 * attempt after it accepts connections again, and the failed attempts before that follow the
 * back-off schedule (src/runtime/tick/retry-backoff.ts) — neither a spin nor a long fixed wait. The
 * time from accept to claim is printed, not asserted (docs/fault-injection.md has the figures).
 */
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { startLocalPostgres, type LocalPostgres } from '../../src/dev/embedded-postgres.ts';
import { startNodeRunner } from '../../src/platform/node/runner.ts';
import { retryDelayRange } from '../../src/runtime/tick/retry-backoff.ts';
import { createSkiplock } from '../../src/runtime/skiplock.ts';
import { createPgDriver } from '../../src/store/drivers/pg.ts';
import { migrate } from '../../src/store/migrate.ts';
import { loadMigrations } from '../../src/store/migrations-fs.ts';
import { statement, type Sql } from '../../src/store/sql.ts';
import { exampleTasks } from '../../src/tasks/examples.ts';

let root: string;
let pg: LocalPostgres;
let sql: Sql;

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'skiplock-restart-'));
  await chmod(root, 0o755);
  pg = await startLocalPostgres({ dir: join(root, 'data'), persistent: true });
  sql = createPgDriver(pg.url, { max: 4 });
  await migrate(sql, await loadMigrations());
}, 120_000);
afterAll(async () => {
  await sql?.close();
  await pg?.stop();
  await rm(root, { recursive: true, force: true });
});

interface Failure {
  at: number;
  failures: number;
  retryInMs: number;
}

test('after a restart, the first attempt once PostgreSQL accepts connections claims the job; the failed ones followed the back-off', async () => {
  const failed: Failure[] = [];
  const log = (_level: string, message: string, fields?: Record<string, unknown>) => {
    if (/failed; retrying/.test(message)) failed.push({ at: performance.now(), failures: Number(fields?.failures), retryInMs: Number(fields?.retryInMs) });
  };
  const skiplock = createSkiplock({ sql, tasks: exampleTasks, log, retention: false });
  const runner = await startNodeRunner({ skiplock, apiToken: 'node-restart-token-0123', port: 0, log: () => {} });
  try {
    // Due 300 ms from now: the runner's tick for it runs while the server is down.
    const job = await skiplock.enqueue({ task: 'echo', payload: { message: 'after the restart' }, delayMs: 300 });
    const downAt = performance.now();
    await pg.restart(2_500);
    const upAt = performance.now(); // the server accepts connections again
    const admin = createPgDriver(pg.url, { max: 1 });
    let claimedAt: number;
    try {
      for (;;) {
        const [row] = await admin.query(statement(`SELECT status FROM skiplock.job WHERE id = $1`, [job.id]));
        if (row!.status !== 'QUEUED') {
          claimedAt = performance.now();
          break;
        }
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
    } finally {
      await admin.close();
    }
    console.log(`Node runner: PostgreSQL down ${Math.round(upAt - downAt)} ms; accept → claim ${Math.round(claimedAt - upAt)} ms; ${failed.length} failed attempts: ${failed.map((f) => f.retryInMs).join(', ')} ms`);

    expect(failed.length).toBeGreaterThan(0);
    // One run of failures, counted 1, 2, 3, … (reset only by a success), each wait from the schedule.
    failed.forEach((f, i) => {
      expect(f.failures).toBe(i + 1);
      const { min, max } = retryDelayRange(f.failures, Object.assign(new Error(), { code: 'ECONNREFUSED' }));
      expect(f.retryInMs).toBeGreaterThanOrEqual(min);
      expect(f.retryInMs).toBeLessThanOrEqual(max);
    });
    // No spin: no more attempts than the schedule's shortest waits fit in the outage (plus the first).
    let fit = 0;
    for (let spent = 0; spent <= upAt - downAt; fit += 1) spent += retryDelayRange(fit + 1, Object.assign(new Error(), { code: 'ECONNREFUSED' })).min;
    expect(failed.length).toBeLessThanOrEqual(fit + 1);
    // The attempt after the server came back claimed it: nothing failed after the accept.
    expect(failed.filter((f) => f.at > upAt)).toEqual([]);
  } finally {
    await runner.stop();
  }
}, 60_000);
