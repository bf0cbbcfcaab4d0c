/**
 * Claim latency as the table grows: the steady-state statement (completeAndClaim: write the
 * previous batch DONE, claim the next) timed round trip by round trip, after the table is
 * topped up to a number of finished (DONE) rows and of QUEUED rows. Rows are inserted with
 * generate_series, then VACUUM ANALYZE stands in for autovacuum. Each step also keeps the
 * EXPLAIN ANALYZE of one claim.
 */
import { completeAndClaim, type ResultRow } from '../../src/store/claim.ts';
import { createPgDriver } from '../../src/store/drivers/pg.ts';
import { statement, type Sql, type Statement } from '../../src/store/sql.ts';
import { percentile, round, uncountedClient } from './harness.ts';
import { seeded } from '../support/seed.ts';

export interface ClaimStep {
  label: string;
  /** Total DONE rows in the table during this step. */
  doneRows: number;
  /** QUEUED rows at the start of this step. */
  queuedRows: number;
  /**
   * fresh (default): VACUUM ANALYZE after the rows are in, as autovacuum eventually does.
   * stale: ANALYZE before the QUEUED rows are inserted and autovacuum off for the table — the
   * window after a burst of enqueues, before autovacuum's next ANALYZE sees it.
   */
  stats?: 'fresh' | 'stale';
  /** Timed round trips for this step. Default: the run's `iterations`. */
  iterations?: number;
}

export interface ClaimLatencyParams {
  url: string;
  steps: readonly ClaimStep[];
  /** Jobs per claim. Default 100. */
  batch?: number;
  /** Timed round trips per step. Default 200. */
  iterations?: number;
}

export interface ClaimStepResult extends ClaimStep {
  p50Ms: number;
  p99Ms: number;
  meanMs: number;
  /** Server-side execution time of one claim, from EXPLAIN ANALYZE. */
  explainMs: number;
  plan: string;
  insertMs: number;
}

// Finished rows are records only; QUEUED rows a record and a queue row each (migration 021: seeded).
const DONE_ROWS = `INSERT INTO skiplock.job_record (task, payload, status, attempts, max_attempts, timeout_ms, run_at, created_at, updated_at, finished_at)
  SELECT 'noop', '{}'::jsonb, 'DONE', 1, 5, 10000, t, t, t, t
    FROM (SELECT now() - interval '30 days' + g * interval '1 millisecond' AS t FROM generate_series(1, $1) g) s`;
const QUEUED_ROWS = seeded(`INSERT INTO skiplock.job_record (task, payload, max_attempts, timeout_ms, run_at, created_at, updated_at)
  SELECT 'noop', '{}'::jsonb, 5, 10000, t, t, t
    FROM (SELECT now() - interval '1 hour' + g * interval '1 microsecond' AS t FROM generate_series(1, $1) g) s`);
const TABLES = ['skiplock.queue', 'skiplock.job_record'];

async function countOf(sql: Sql, status: 'DONE' | 'QUEUED'): Promise<number> {
  const table = status === 'DONE' ? 'skiplock.job_record' : 'skiplock.queue';
  const [row] = await sql.query<{ n: string }>(statement(`SELECT count(*) AS n FROM ${table} WHERE status = $1`, [status]));
  return Number(row?.n ?? 0);
}

export async function claimLatency(p: ClaimLatencyParams): Promise<ClaimStepResult[]> {
  const batch = p.batch ?? 100;
  const iterations = p.iterations ?? 200;
  const sql = createPgDriver(p.url, { max: 1 });
  const workerId = `claim-latency:${crypto.randomUUID()}`;
  const claim = (results: ResultRow[], limit = batch) =>
    completeAndClaim({ now: null, workerId, results, limit, budgetMs: 3_600_000, leaseMs: 30_000, leaseGraceMs: 5_000, tasks: ['noop'] });
  const out: ClaimStepResult[] = [];
  let results: ResultRow[] = [];
  try {
    for (const step of p.steps) {
      // Finish what the previous step left claimed, so the step starts with nothing RUNNING.
      if (results.length > 0) await sql.query(claim(results, 0));
      results = [];
      const t0 = performance.now();
      const stale = step.stats === 'stale';
      const needDone = step.doneRows - (await countOf(sql, 'DONE'));
      if (needDone > 0) await sql.query(statement(DONE_ROWS, [needDone]));
      if (stale) {
        for (const table of TABLES) await sql.query(statement(`ALTER TABLE ${table} SET (autovacuum_enabled = off)`));
        for (const table of TABLES) await sql.query(statement(`VACUUM ANALYZE ${table}`));
      }
      const needQueued = step.queuedRows - (await countOf(sql, 'QUEUED'));
      if (needQueued > 0) await sql.query(statement(QUEUED_ROWS, [needQueued]));
      if (!stale) for (const table of TABLES) await sql.query(statement(`VACUUM ANALYZE ${table}`));
      const insertMs = performance.now() - t0;

      let plan = { ms: NaN, text: '' };
      const times: number[] = [];
      const timed = step.iterations ?? iterations;
      for (let i = -Math.min(10, timed); i < timed; i++) {
        // In steady state (after the warm-up), explain the real statement once, rolled back.
        if (i === 0) plan = await explainClaim(p.url, claim(results));
        const s = claim(results);
        const start = performance.now();
        const rows = await sql.query(s);
        if (i >= 0) times.push(performance.now() - start);
        results = rows
          .filter((r) => r.id !== null && r.id !== undefined)
          .map((r) => ({ id: String(r.id), attempt: Number(r.attempts), status: 'DONE', result: null, error: null, delay_ms: 0, release: false }));
      }
      out.push({
        ...step,
        p50Ms: round(percentile(times, 50), 2),
        p99Ms: round(percentile(times, 99), 2),
        meanMs: round(times.reduce((a, b) => a + b, 0) / times.length, 2),
        explainMs: plan.ms,
        plan: plan.text,
        insertMs: Math.round(insertMs),
      });
    }
    return out;
  } finally {
    await sql.close();
  }
}

/** EXPLAIN ANALYZE of one claim, inside a transaction that is rolled back (the claim runs, then is undone). */
async function explainClaim(url: string, s: Statement): Promise<{ ms: number; text: string }> {
  const client = await uncountedClient(url);
  try {
    await client.query('BEGIN');
    const r = await client.query(`EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) ${s.text}`, s.values as unknown[]);
    await client.query('ROLLBACK');
    const lines = r.rows.map((row: Record<string, unknown>) => String(row['QUERY PLAN']));
    const exec = lines.find((l) => l.startsWith('Execution Time'));
    return { ms: exec ? Number(/([\d.]+) ms/.exec(exec)?.[1] ?? NaN) : NaN, text: lines.join('\n') };
  } finally {
    await client.end();
  }
}
