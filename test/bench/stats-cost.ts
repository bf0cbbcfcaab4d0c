/**
 * What stats() — GET /v1/stats, a /metrics scrape, the dashboard's overview — costs on a large
 * table: 1,000,000 DONE jobs and 1,000 live ones (600 due, 200 scheduled, 100 RUNNING, 100 DEAD),
 * generated with INSERT … SELECT generate_series, then VACUUM ANALYZE.
 *   node --experimental-strip-types test/bench/stats-cost.ts [doneRows=1000000]
 * Prints the median of 20 calls of stats() and of the whole-table count it replaced, and
 * EXPLAIN (ANALYZE, BUFFERS) of the statement (shared buffers hit/read: pages touched).
 */
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startLocalPostgres } from '../../src/dev/embedded-postgres.ts';
import { createSkiplock } from '../../src/runtime/skiplock.ts';
import { jobStats } from '../../src/store/admin.ts';
import { createPgDriver } from '../../src/store/drivers/pg.ts';
import { seeded } from '../support/seed.ts';
import { migrate } from '../../src/store/migrate.ts';
import { loadMigrations } from '../../src/store/migrations-fs.ts';
import { statement, type Statement } from '../../src/store/sql.ts';
import { exampleTasks } from '../../src/tasks/examples.ts';

const doneRows = Number(process.argv[2] ?? 1_000_000);
const root = await mkdtemp(join(tmpdir(), 'skiplock-stats-bench-'));
await chmod(root, 0o755);
const pg = await startLocalPostgres({ dir: join(root, 'data'), persistent: false });
const sql = createPgDriver(pg.url, { max: 2 });
try {
  await migrate(sql, await loadMigrations());
  const run = (text: string) => sql.query(statement(text));
  // Records (and, for live jobs, queue rows: seeded) as the statements leave them (migration 021).
  const record = `INSERT INTO skiplock.job_record (task, payload, status, attempts, max_attempts, timeout_ms, run_at, created_at, updated_at, finished_at, failed_status, failed_at, locked_by, locked_until)`;
  await run(`${record} SELECT (ARRAY['echo', 'sleep', 'flaky'])[1 + g % 3], '{}', 'DONE', 1, 5, 10000, now() - g * interval '1 ms', now() - g * interval '1 ms', now(), now() - g * interval '1 ms', NULL, NULL, NULL, NULL
               FROM generate_series(1, ${doneRows}) g`);
  await run(seeded(`${record} SELECT 'echo', '{}', 'QUEUED', 0, 5, 10000, now() - interval '1 second', now(), now(), NULL, NULL, NULL, NULL, NULL FROM generate_series(1, 600)`));
  await run(seeded(`${record} SELECT 'echo', '{}', 'QUEUED', 0, 5, 10000, now() + interval '1 hour', now(), now(), NULL, NULL, NULL, NULL, NULL FROM generate_series(1, 200)`));
  await run(seeded(`${record} SELECT 'sleep', '{}', 'RUNNING', 1, 5, 10000, now(), now(), now(), NULL, NULL, NULL, 'w', now() + interval '1 hour' FROM generate_series(1, 100)`));
  await run(`${record} SELECT 'poison', '{}', 'DEAD', 1, 5, 10000, now(), now(), now(), now(), 'DEAD', now(), NULL, NULL FROM generate_series(1, 100)`);
  await run(`VACUUM ANALYZE skiplock.job_record`);
  await run(`VACUUM ANALYZE skiplock.queue`);

  const skiplock = createSkiplock({ sql, tasks: exampleTasks, log: () => {}, retention: false });
  const median = async (f: () => Promise<unknown>) => {
    const times: number[] = [];
    for (let i = 0; i < 20; i += 1) {
      const t0 = performance.now();
      await f();
      times.push(performance.now() - t0);
    }
    return times.sort((a, b) => a - b)[10]!.toFixed(1);
  };
  // The statement stats() ran before: every row, grouped by status and task.
  const whole = statement(`SELECT status, task, count(*)::int AS n FROM skiplock.job_record GROUP BY status, task`);
  const stats = await skiplock.stats();
  console.log(`${doneRows} DONE + 1000 live: stats() ${await median(() => skiplock.stats())} ms (median of 20), the whole-table count ${await median(() => sql.query(whole))} ms`);
  console.log(`counts ${JSON.stringify(stats.counts)} (DONE ${stats.doneCount}), depth ${JSON.stringify(stats.depth)}`);
  const explain = async (s: Statement) =>
    (await sql.query(statement(`EXPLAIN (ANALYZE, BUFFERS) ${s.text}`, s.values))).map((r) => r['QUERY PLAN']).join('\n');
  console.log(await explain(jobStats({ now: null })));
  console.log('--- the whole-table count');
  console.log(await explain(whole));
} finally {
  await sql.close();
  await pg.stop();
  await rm(root, { recursive: true, force: true });
}
