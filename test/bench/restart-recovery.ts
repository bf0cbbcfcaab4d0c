/**
 * The Node runner through PostgreSQL restarts: how long from the server accepting connections
 * again to the first claim of a job that fell due while it was down.
 *   node --experimental-strip-types test/bench/restart-recovery.ts [runs=10] [downMs=1500]
 * Each run: a job due 200 ms after the stop, the server down `downMs`, then the time from the
 * restart resolving (the server accepts connections) to the job leaving QUEUED, polled every 2 ms.
 */
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startLocalPostgres } from '../../src/dev/embedded-postgres.ts';
import { startNodeRunner } from '../../src/platform/node/runner.ts';
import { createSkiplock } from '../../src/runtime/skiplock.ts';
import { createPgDriver } from '../../src/store/drivers/pg.ts';
import { migrate } from '../../src/store/migrate.ts';
import { loadMigrations } from '../../src/store/migrations-fs.ts';
import { statement } from '../../src/store/sql.ts';
import { exampleTasks } from '../../src/tasks/examples.ts';

const runs = Number(process.argv[2] ?? 10);
const downMs = Number(process.argv[3] ?? 1_500);
const root = await mkdtemp(join(tmpdir(), 'skiplock-restart-bench-'));
await chmod(root, 0o755);
const pg = await startLocalPostgres({ dir: join(root, 'data'), persistent: true });
const sql = createPgDriver(pg.url, { max: 4 });
await migrate(sql, await loadMigrations());
const skiplock = createSkiplock({ sql, tasks: exampleTasks, log: () => {}, retention: false });
const runner = await startNodeRunner({ skiplock, apiToken: 'restart-bench-token-0123', port: 0, log: () => {} });
const figures: number[] = [];
try {
  for (let i = 0; i < runs; i += 1) {
    const job = await skiplock.enqueue({ task: 'echo', payload: { message: `run ${i}` }, delayMs: 200 });
    await pg.restart(downMs);
    const upAt = performance.now();
    const admin = createPgDriver(pg.url, { max: 1 });
    for (;;) {
      const [row] = await admin.query(statement(`SELECT status FROM skiplock.job WHERE id = $1`, [job.id]));
      if (row!.status !== 'QUEUED') break;
      await new Promise((resolve) => setTimeout(resolve, 2));
    }
    figures.push(Math.round(performance.now() - upAt));
    await admin.close();
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
} finally {
  await runner.stop();
  await sql.close();
  await pg.stop();
  await rm(root, { recursive: true, force: true });
}
const sorted = [...figures].sort((a, b) => a - b);
const at = (p: number) => sorted[Math.min(sorted.length - 1, Math.ceil(p * sorted.length) - 1)];
console.log(`down ${downMs} ms, ${runs} runs: accept → first claim ${figures.join(', ')} ms; median ${at(0.5)} ms, max ${sorted.at(-1)} ms`);
