/**
 * The floor: skiplock's own steady-state statement (completeAndClaim) in a bare loop on the pg
 * driver. Each round trip marks the previous batch DONE and claims the next; no handlers, no
 * timers, no row mapping. Whatever skiplock's tick costs beyond this is its own overhead.
 *
 * With `connections` > 1 (issue 17's floor for parallel claimers), that many such loops run at
 * once, each on a connection of its own: claim 100 with SKIP LOCKED + one fenced batch update,
 * per connection.
 */
import { seeded } from '../support/seed.ts';
import { completeAndClaim, type ResultRow } from '../../src/store/claim.ts';
import { createPgDriver } from '../../src/store/drivers/pg.ts';
import { statement } from '../../src/store/sql.ts';
import { countingSql, countPgQueries, countRows, databaseOf, finishResult, readServerCounters, readStatementStats, analyzeDatabase, type ThroughputParams, type ThroughputResult } from './harness.ts';

export interface RawSqlThroughputParams extends ThroughputParams {
  /** Loops running at once, one connection each; each claims `concurrency` per round trip. Default 1. */
  connections?: number;
}

export async function rawSqlThroughput(p: RawSqlThroughputParams): Promise<ThroughputResult> {
  const connections = p.connections ?? 1;
  const database = databaseOf(p.url);
  const pgCounter = countPgQueries();
  const counted = countingSql(createPgDriver(p.url, { max: connections }));
  const { sql } = counted;
  try {
    await sql.query(statement(seeded(`INSERT INTO skiplock.job_record (task, payload) SELECT 'noop', '{}'::jsonb FROM generate_series(1, $1)`), [p.jobs]));
    if (p.tableStats !== 'fresh') await analyzeDatabase(p.url);
    const before = await readServerCounters(p.adminUrl, database, p.postmasterPid);
    counted.reset();
    pgCounter.reset(database);
    let handled = 0;
    let firstStart = 0;
    const loop = async () => {
      const workerId = `raw:${crypto.randomUUID()}`;
      let results: ResultRow[] = [];
      for (;;) {
        const rows = await sql.query(
          completeAndClaim({ now: null, workerId, results, limit: p.concurrency, budgetMs: 3_600_000, leaseMs: 30_000, leaseGraceMs: 5_000, tasks: ['noop'] }),
        );
        results = [];
        for (const row of rows) {
          if (row.id === null || row.id === undefined) continue;
          if (handled++ === 0) firstStart = performance.now();
          results.push({ id: String(row.id), attempt: Number(row.attempts), status: 'DONE', result: null, error: null, delay_ms: 0, release: false });
        }
        if (results.length === 0) break;
      }
    };
    await Promise.all(Array.from({ length: connections }, loop));
    const ms = performance.now() - firstStart;
    const after = await readServerCounters(p.adminUrl, database, p.postmasterPid);
    const completed = await countRows(p.url, `SELECT count(*) AS n FROM skiplock.job WHERE status = 'DONE'`);
    const result = finishResult(
      {
        system: 'raw SQL floor',
        config: `completeAndClaim loop, batch ${p.concurrency}, ${connections === 1 ? 'one connection' : `${connections} connections`}`,
        jobs: p.jobs,
        completed,
        handled,
        ms,
        roundTrips: pgCounter.read(database),
        claimBatches: counted.counts.claimBatches,
      },
      { before, after },
    );
    if (p.adminUrl) result.statements = (await readStatementStats(p.adminUrl, database)).slice(0, 5);
    return result;
  } finally {
    await sql.close();
  }
}
