/**
 * What every benchmark shares: the result shapes, a round-trip counter on `pg`'s Client (so the
 * peers' own queries are counted the same way as skiplock's), a counting Sql port, and small
 * helpers for waiting and percentiles.
 */
import pg from 'pg';
import type { Row, Sql, Statement } from '../../src/store/sql.ts';
import { postgresCpuMs, processCpuMs } from './cpu.ts';

/** One throughput run: `jobs` no-op jobs enqueued first, then drained by the system under test. */
export interface ThroughputParams {
  /** Connection string of a database the run owns. */
  url: string;
  jobs: number;
  /** Jobs in flight at once, in total (how it is split is the system's `config`). */
  concurrency: number;
  /** The maintenance database, to read server-side counters (pg_stat_statements). */
  adminUrl?: string;
  /** The server's postmaster pid, to measure its CPU time over the run (Linux). */
  postmasterPid?: number;
  /**
   * analyzed (default): VACUUM ANALYZE the database after enqueueing, as autovacuum would have by
   * the time a backlog is worked off in steady state — every system gets the same.
   * fresh: no statistics on the just-filled queue and autovacuum off for it, as in the first
   * minute after a burst of enqueues (skiplock only).
   */
  tableStats?: 'analyzed' | 'fresh';
}

/** Runs VACUUM ANALYZE on the whole database (each system's tables), outside the measured window. */
export async function analyzeDatabase(url: string): Promise<void> {
  const client = await uncountedClient(url);
  try {
    await client.query(`${BENCH_MARK} VACUUM ANALYZE`);
  } finally {
    await client.end();
  }
}

export interface ThroughputResult {
  system: string;
  /** How the system was configured, e.g. "localConcurrency 2 × batchSize 50". */
  config: string;
  jobs: number;
  /** Jobs the database shows as finished after the run (must equal `jobs`). */
  completed: number;
  /** Handler calls (must equal `jobs`: no job ran twice). */
  handled: number;
  /** From the first handler call until the database shows every job finished. */
  ms: number;
  jobsPerSec: number;
  /** Queries sent over `pg` connections from the worker's start until the end (client-side count). */
  roundTrips: number;
  roundTripsPerJob: number;
  /** Statements the server executed for this database (pg_stat_statements), when available. */
  serverStatements?: number;
  /** Planning + execution time of those statements, ms per 1,000 jobs (pg_stat_statements). */
  serverStatementMsPerKJob?: number;
  /** CPU of this (worker) process over the run, ms per 1,000 jobs. */
  clientCpuMsPerKJob?: number;
  /** CPU of every PostgreSQL process over the run, ms per 1,000 jobs (when postmasterPid is given). */
  serverCpuMsPerKJob?: number;
  /** skiplock and the raw loop: statements that claimed at least one job, and the jobs they claimed. */
  claimBatches?: number;
  /** skiplock and the raw loop: round trips per batch that claimed at least one job. */
  roundTripsPerBatch?: number;
  /** skiplock and the raw loop: mean jobs claimed per claiming statement. */
  meanBatch?: number;
  /** skiplock and the raw loop: the statements that took most server time (pg_stat_statements). */
  statements?: StatementStats[];
  /** skiplock, with BENCH_WAITS=1: what the database's busy backends waited on, sampled every 10 ms (wait_event_type:wait_event → samples). */
  waits?: Record<string, number>;
}

// ---------------------------------------------------------------------------------------------
// Round trips, counted on the client: every query() on a pg.Client of the database under test.

const counts = new Map<string, number>();
let patched = false;

/**
 * Counts every query sent by `pg` clients, per database. pg-boss, graphile-worker and skiplock's
 * pg driver all use this one `pg`, so the count is the same measure for each. Clients marked
 * with `uncounted()` (the bench's own checks) are left out.
 */
export function countPgQueries(): { read(database: string): number; reset(database: string): void } {
  if (!patched) {
    patched = true;
    const original = pg.Client.prototype.query;
    pg.Client.prototype.query = function (this: pg.Client & { __uncounted?: boolean }, ...args: unknown[]) {
      if (!this.__uncounted) {
        const db = this.database ?? '';
        counts.set(db, (counts.get(db) ?? 0) + 1);
      }
      return (original as (...a: unknown[]) => unknown).apply(this, args);
    } as typeof original;
  }
  return {
    read: (database) => counts.get(database) ?? 0,
    reset: (database) => counts.set(database, 0),
  };
}

/** Marks the bench's own queries, so that pg_stat_statements counts can leave them out. */
export const BENCH_MARK = '/* bench */';

/** A pg client whose queries the counter ignores (for the bench's own checks). */
export async function uncountedClient(url: string): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: url }) as pg.Client & { __uncounted?: boolean };
  client.__uncounted = true;
  await client.connect();
  return client;
}

export function databaseOf(url: string): string {
  return decodeURIComponent(new URL(url).pathname.slice(1));
}

// ---------------------------------------------------------------------------------------------
// Round trips, counted on the Sql port (skiplock and the raw loop): also how many jobs each claimed.

export interface SqlCounts {
  statements: number;
  /** completeAndClaim statements that claimed at least one job. */
  claimBatches: number;
  claimedJobs: number;
  /** Statement counts by their first words, to see what besides claims was sent. */
  byKind: Record<string, number>;
}

/** completeAndClaim, by its text (either write: the general one starts with its results, the DONE one with its write). */
export const isClaimStatement = (text: string) => /^(WITH results AS|WITH written AS|WITH ended AS)/.test(text.replace(/^(\s*--[^\n]*\n)*/, '').trimStart());

export function countingSql(sql: Sql): { sql: Sql; counts: SqlCounts; reset(): void } {
  const counts: SqlCounts = { statements: 0, claimBatches: 0, claimedJobs: 0, byKind: {} };
  const kind = (s: Statement) => s.text.trimStart().slice(0, 24).replace(/\s+/g, ' ');
  const wrapped: Sql = {
    async query<R extends Row>(s: Statement) {
      counts.statements += 1;
      counts.byKind[kind(s)] = (counts.byKind[kind(s)] ?? 0) + 1;
      const rows = await sql.query<R>(s);
      if (isClaimStatement(s.text)) {
        const claimed = rows.filter((r) => r.id !== null && r.id !== undefined).length;
        counts.claimedJobs += claimed;
        if (claimed > 0) counts.claimBatches += 1;
      }
      return rows;
    },
    async batch(statements) {
      counts.statements += 1;
      counts.byKind.batch = (counts.byKind.batch ?? 0) + 1;
      return sql.batch(statements);
    },
    close: () => sql.close(),
  };
  return {
    sql: wrapped,
    counts,
    reset() {
      Object.assign(counts, { statements: 0, claimBatches: 0, claimedJobs: 0, byKind: {} });
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Server-side counts, read with an uncounted connection to the maintenance database.

export interface ServerCounters {
  statements: number | undefined;
  /** pg_stat_statements total planning + execution ms. */
  statementMs: number | undefined;
  /** CPU ms of the whole server (undefined without a postmaster pid). */
  serverCpuMs: number | undefined;
  clientCpuMs: number;
}

/**
 * Statements the server ran for one database (pg_stat_statements, if loaded), for before/after
 * deltas. (pg_stat_database.xact_commit is no use here: backends report it up to 10 s late.)
 */
export async function readServerCounters(adminUrl: string | undefined, database: string, postmasterPid?: number): Promise<ServerCounters> {
  const cpu = () => ({ serverCpuMs: postmasterPid ? postgresCpuMs(postmasterPid) : undefined, clientCpuMs: processCpuMs() });
  if (!adminUrl) return { statements: undefined, statementMs: undefined, ...cpu() };
  const client = await uncountedClient(adminUrl);
  try {
    let statements: number | undefined;
    let statementMs: number | undefined;
    try {
      const r = await client.query(
        `SELECT coalesce(sum(calls), 0)::bigint AS n, coalesce(sum(total_exec_time + total_plan_time), 0)::float8 AS ms
           FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid
          WHERE d.datname = $1 AND s.query NOT LIKE '${BENCH_MARK}%'`,
        [database],
      );
      statements = Number(r.rows[0]?.n ?? 0);
      statementMs = Number(r.rows[0]?.ms ?? 0);
    } catch {
      statements = undefined;
    }
    return { statements, statementMs, ...cpu() };
  } finally {
    await client.end();
  }
}

// ---------------------------------------------------------------------------------------------

export function finishResult(
  r: Omit<ThroughputResult, 'jobsPerSec' | 'roundTripsPerJob'>,
  server?: { before: ServerCounters; after: ServerCounters },
): ThroughputResult {
  const result: ThroughputResult = {
    ...r,
    jobsPerSec: Math.round((r.jobs / r.ms) * 1000),
    roundTripsPerJob: round(r.roundTrips / r.jobs, 4),
  };
  if (server) {
    const { before, after } = server;
    const perKJob = (a: number | undefined, b: number | undefined) => (a === undefined || b === undefined ? undefined : round(((a - b) / r.jobs) * 1000, 1));
    if (before.statements !== undefined && after.statements !== undefined) result.serverStatements = after.statements - before.statements;
    result.serverStatementMsPerKJob = perKJob(after.statementMs, before.statementMs);
    result.clientCpuMsPerKJob = perKJob(after.clientCpuMs, before.clientCpuMs);
    result.serverCpuMsPerKJob = perKJob(after.serverCpuMs, before.serverCpuMs);
  }
  if (r.claimBatches) {
    result.roundTripsPerBatch = round(r.roundTrips / r.claimBatches, 3);
    result.meanBatch = round(r.jobs / r.claimBatches, 1);
  }
  return result;
}

export function round(n: number, digits = 2): number {
  const f = 10 ** digits;
  return Math.round(n * f) / f;
}

/** The p-th percentile (0–100) of the values, nearest rank. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[rank]!;
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Polls `check` every `everyMs` until it returns true; throws after `timeoutMs`. */
export async function waitFor(check: () => Promise<boolean> | boolean, what: string, timeoutMs = 120_000, everyMs = 10): Promise<void> {
  const end = performance.now() + timeoutMs;
  while (!(await check())) {
    if (performance.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(everyMs);
  }
}

/** One uncounted connection for repeated checks (polling for completion) without a connection per check. */
export async function openChecker(url: string): Promise<{ count(sqlText: string, values?: unknown[]): Promise<number>; close(): Promise<void> }> {
  const client = await uncountedClient(url);
  return {
    async count(sqlText, values = []) {
      const r = await client.query(`${BENCH_MARK} ${sqlText}`, values);
      return Number(r.rows[0]?.n ?? 0);
    },
    close: () => client.end(),
  };
}

/** Counts rows with one query on an uncounted connection. */
export async function countRows(url: string, sqlText: string, values: unknown[] = []): Promise<number> {
  const client = await uncountedClient(url);
  try {
    const r = await client.query(`${BENCH_MARK} ${sqlText}`, values);
    return Number(r.rows[0]?.n ?? 0);
  } finally {
    await client.end();
  }
}

/** Enqueue→start latency of jobs enqueued one at a time at a steady rate while the worker runs. */
export interface LatencyParams {
  url: string;
  /** Jobs enqueued per second. */
  rate: number;
  /** How many jobs to enqueue. */
  samples: number;
}

export interface LatencyResult {
  system: string;
  config: string;
  samples: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
}

export function latencyResult(system: string, config: string, latencies: readonly number[]): LatencyResult {
  return {
    system,
    config,
    samples: latencies.length,
    p50Ms: round(percentile(latencies, 50), 1),
    p99Ms: round(percentile(latencies, 99), 1),
    maxMs: round(Math.max(...latencies), 1),
  };
}

/**
 * Calls `enqueue(i, t)` `samples` times at `rate` per second, each at its own scheduled instant
 * (a slow enqueue does not push the next ones back); `t` is the instant it was called.
 */
export async function enqueueSteadily(rate: number, samples: number, enqueue: (i: number, t: number) => Promise<unknown>): Promise<void> {
  const start = performance.now();
  const pending: Promise<unknown>[] = [];
  for (let i = 0; i < samples; i++) {
    const due = start + (i * 1000) / rate;
    const wait = due - performance.now();
    if (wait > 0) await sleep(wait);
    pending.push(enqueue(i, performance.now()));
  }
  await Promise.all(pending);
}

/** One statement's counters from pg_stat_statements (per database), for the per-statement tables. */
export interface StatementStats {
  /** The statement's first words (its text is long). */
  query: string;
  calls: number;
  rows: number;
  /** Planning + execution, ms. */
  totalMs: number;
  meanMs: number;
  /** Planning part of totalMs, ms. */
  planMs: number;
  sharedBlksHit: number;
  sharedBlksRead: number;
  sharedBlksDirtied: number;
  walBytes: number;
}

/** Every statement pg_stat_statements recorded for one database (the bench's own left out), most time first. */
/** completeAndClaim's statements among `stats` (both write shapes), their calls and mean ms per call (undefined: none). */
export function claimStatementStats(stats: readonly StatementStats[]): { claims: StatementStats[]; calls: number; meanMs: number | undefined } {
  const claims = stats.filter((s) => isClaimStatement(s.query));
  const calls = claims.reduce((a, s) => a + s.calls, 0);
  return { claims, calls, meanMs: calls > 0 ? claims.reduce((a, s) => a + s.totalMs, 0) / calls : undefined };
}

export async function readStatementStats(adminUrl: string, database: string): Promise<StatementStats[]> {
  const client = await uncountedClient(adminUrl);
  try {
    const r = await client.query(
      `${BENCH_MARK} SELECT left(regexp_replace(s.query, '\\s+', ' ', 'g'), 60) AS query, s.calls::float8 AS calls, s.rows::float8 AS rows,
              (s.total_exec_time + s.total_plan_time)::float8 AS total_ms, s.total_plan_time::float8 AS plan_ms,
              s.shared_blks_hit::float8 AS hit, s.shared_blks_read::float8 AS read, s.shared_blks_dirtied::float8 AS dirtied, s.wal_bytes::float8 AS wal
         FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid
        WHERE d.datname = $1 AND s.query NOT LIKE '${BENCH_MARK}%'
        ORDER BY total_ms DESC`,
      [database],
    );
    return r.rows.map((x) => ({
      query: String(x.query),
      calls: Number(x.calls),
      rows: Number(x.rows),
      totalMs: round(Number(x.total_ms), 1),
      meanMs: round(Number(x.total_ms) / Math.max(1, Number(x.calls)), 3),
      planMs: round(Number(x.plan_ms), 1),
      sharedBlksHit: Number(x.hit),
      sharedBlksRead: Number(x.read),
      sharedBlksDirtied: Number(x.dirtied),
      walBytes: Number(x.wal),
    }));
  } finally {
    await client.end();
  }
}

/**
 * Samples pg_stat_activity every `everyMs` for the backends of one database that are running a
 * statement: what they wait on (`CPU` when nothing: on CPU or runnable). Stop it to get the counts.
 */
export async function sampleWaits(adminUrl: string, database: string, everyMs = 10): Promise<() => Promise<Record<string, number>>> {
  const client = await uncountedClient(adminUrl);
  const counts: Record<string, number> = {};
  let running = true;
  const loop = (async () => {
    while (running) {
      const r = await client.query(
        `${BENCH_MARK} SELECT coalesce(wait_event_type || ':' || wait_event, 'CPU') AS w, count(*)::int AS n FROM pg_stat_activity
          WHERE datname = $1 AND state = 'active' AND backend_type = 'client backend' GROUP BY 1`,
        [database],
      );
      for (const row of r.rows) counts[row.w] = (counts[row.w] ?? 0) + Number(row.n);
      counts.samples = (counts.samples ?? 0) + 1;
      await sleep(everyMs);
    }
  })();
  return async () => {
    running = false;
    await loop;
    await client.end();
    return counts;
  };
}
