/**
 * skiplock under the benchmarks: ticks from createSkiplock, on the pg driver (or Neon's HTTP
 * driver through the local proxy), no-op handlers.
 */
import { seeded } from '../support/seed.ts';
import { z } from 'zod';
import { createSkiplock, type Skiplock } from '../../src/runtime/skiplock.ts';
import { defineTask } from '../../src/runtime/tasks/task.ts';
import { createNeonHttpDriver } from '../../src/store/drivers/neon-http.ts';
import { createPgDriver } from '../../src/store/drivers/pg.ts';
import type { Sql } from '../../src/store/sql.ts';
import {
  countingSql,
  countPgQueries,
  countRows,
  databaseOf,
  enqueueSteadily,
  finishResult,
  latencyResult,
  readServerCounters,
  readStatementStats,
  sampleWaits,
  analyzeDatabase,
  waitFor,
  type LatencyParams,
  type LatencyResult,
  type ThroughputParams,
  type ThroughputResult,
} from './harness.ts';

export interface SkiplockThroughputParams extends ThroughputParams {
  /** Ticks running at once; each gets concurrency / ticks slots (or `perTick`). Default 1. */
  ticks?: number;
  /**
   * Slots per tick, instead of concurrency / ticks (issue 17's shapes: 4 ticks × 100, 48 × 25);
   * 'default': tick() without a concurrency option, the library's default (10).
   */
  perTick?: number | 'default';
  /** Default pg. */
  driver?: 'pg' | 'neon-http';
  /** For neon-http: the local proxy's /sql endpoint. */
  fetchEndpoint?: string;
  /** Flow control on the no-op task (issue 14); absent: the plain claim path. */
  flow?: FlowParams;
  /** Fair share (issue 35): the jobs spread round-robin over this many fairness keys. Default: env BENCH_FAIR_KEYS, else none. */
  fairKeys?: number;
}

/** The no-op task's flow-control options, for the flow-control scenarios. */
export interface FlowParams {
  /** concurrency: { limit } — per key when `keys` is given. */
  concurrencyLimit?: number;
  /** rateLimit: { limit, periodMs } — per key when `keys` is given. */
  rateLimit?: { limit: number; periodMs: number };
  /** Jobs spread round-robin over this many keys (payload { k }); absent: no key. */
  keys?: number;
}

/** How a flow-control configuration reads in the tables. */
export function describeFlow(f: FlowParams): string {
  const per = f.keys ? ` per key, ${f.keys.toLocaleString('en')} key${f.keys === 1 ? '' : 's'}` : '';
  return [
    f.concurrencyLimit !== undefined ? `concurrency limit ${f.concurrencyLimit}${per}` : '',
    f.rateLimit ? `rate limit ${f.rateLimit.limit.toLocaleString('en')} / ${f.rateLimit.periodMs} ms${per}` : '',
  ].filter(Boolean).join(', ');
}

const silent = () => {};

function openSql(p: { url: string; driver?: 'pg' | 'neon-http'; fetchEndpoint?: string; poolSize: number }): Sql {
  if (p.driver === 'neon-http') return createNeonHttpDriver(p.url, p.fetchEndpoint ? { fetchEndpoint: p.fetchEndpoint } : {});
  return createPgDriver(p.url, { max: p.poolSize });
}

/** Enqueues `n` jobs of `task` in batches through the public API (validated like any enqueue). */
export async function enqueueMany(skiplock: Skiplock, task: string, n: number, payload: (i: number) => unknown = () => ({})) {
  for (let from = 0; from < n; from += 2_000) {
    const inputs = Array.from({ length: Math.min(2_000, n - from) }, (_, k) => ({ task, payload: payload(from + k) }));
    await skiplock.enqueueBatch(inputs);
  }
}

export async function skiplockThroughput(p: SkiplockThroughputParams): Promise<ThroughputResult> {
  const ticks = p.ticks ?? 1;
  const database = databaseOf(p.url);
  const pgCounter = countPgQueries();
  const counted = countingSql(openSql({ ...p, poolSize: ticks + 1 }));
  let handled = 0;
  let firstStart = 0;
  const flow = p.flow;
  const key = flow?.keys ? (payload: { k?: string }) => payload.k ?? '' : undefined;
  // Fair share (issue 35): BENCH_FAIR_KEYS=n spreads the jobs over n fairness keys (ab.ts AB_VARIANTS).
  const fairKeys = p.fairKeys ?? (Number(process.env.BENCH_FAIR_KEYS) || 0);
  const noop = defineTask({
    name: 'noop',
    payload: z.object({ k: z.string().optional() }),
    ...(flow?.concurrencyLimit !== undefined ? { concurrency: { limit: flow.concurrencyLimit, ...(key ? { key } : {}) } } : {}),
    ...(flow?.rateLimit ? { rateLimit: { ...flow.rateLimit, ...(key ? { key } : {}) } } : {}),
    ...(fairKeys > 0 ? { fairness: { key: (payload: { k?: string }) => payload.k ?? 'none' } } : {}),
    handler: () => {
      if (handled++ === 0) firstStart = performance.now();
    },
  });
  // Retention off: what is measured is the claim/complete loop. (Ticks prune at most once a minute
  // per process, one statement; in a run this short it would show as a round trip per tick.)
  const skiplock = createSkiplock({ sql: counted.sql, tasks: [noop], log: silent, retention: false });
  try {
    if (p.tableStats === 'fresh') await counted.sql.query({ text: `ALTER TABLE skiplock.job_record SET (autovacuum_enabled = off); ALTER TABLE skiplock.queue SET (autovacuum_enabled = off)`, values: [] });
    const keys = flow?.keys ?? fairKeys;
    await enqueueMany(skiplock, 'noop', p.jobs, keys ? (i) => ({ k: `key-${i % keys}` }) : undefined);
    if (p.tableStats !== 'fresh') await analyzeDatabase(p.url);
    const before = await readServerCounters(p.adminUrl, database, p.postmasterPid);
    counted.reset();
    pgCounter.reset(database);
    const perTick = p.perTick ?? Math.floor(p.concurrency / ticks);
    const stopSampling = process.env.BENCH_WAITS === '1' && p.adminUrl ? await sampleWaits(p.adminUrl, database) : undefined;
    const results = await Promise.all(
      Array.from({ length: ticks }, () => skiplock.tick({ untilIdle: true, ...(perTick === 'default' ? {} : { concurrency: perTick }), budgetMs: 600_000 })),
    );
    const ms = performance.now() - firstStart;
    const waits = await stopSampling?.();
    const roundTrips = p.driver === 'neon-http' ? counted.counts.statements : pgCounter.read(database);
    const after = await readServerCounters(p.adminUrl, database, p.postmasterPid);
    const completed = await countRows(p.url, `SELECT count(*) AS n FROM skiplock.job WHERE status = 'DONE'`);
    const done = results.reduce((sum, r) => sum + r.done, 0);
    if (done !== completed) throw new Error(`ticks reported ${done} done, the table has ${completed}`);
    const result = finishResult(
      {
        system: p.driver === 'neon-http' ? 'skiplock (Neon HTTP)' : 'skiplock',
        config: `${ticks === 1 ? 'one tick' : `${ticks} ticks`} × concurrency ${perTick === 'default' ? '10 (the default)' : perTick}, ${p.driver ?? 'pg'} driver${p.tableStats === 'fresh' ? ', just-filled table (no statistics yet)' : ''}${flow ? `, ${describeFlow(flow) || 'plain task'}` : ''}${fairKeys > 0 ? `, fair share over ${fairKeys.toLocaleString('en')} key${fairKeys === 1 ? '' : 's'}` : ''}`,
        jobs: p.jobs,
        completed,
        handled,
        ms,
        roundTrips,
        claimBatches: counted.counts.claimBatches,
      },
      { before, after },
    );
    if (p.adminUrl) result.statements = (await readStatementStats(p.adminUrl, database)).slice(0, 5);
    if (waits) result.waits = waits;
    return result;
  } finally {
    await counted.sql.close();
  }
}

export interface SkiplockLatencyParams extends LatencyParams {
  /**
   * poll: one tick runs all along and polls every `pollIntervalMs` while idle.
   * enqueue-and-tick: each enqueue is followed by its own tick, as the HTTP route does with waitUntil.
   */
  mode: 'poll' | 'enqueue-and-tick';
  pollIntervalMs?: number;
}

export async function skiplockLatency(p: SkiplockLatencyParams): Promise<LatencyResult> {
  const sql = createPgDriver(p.url, { max: 10 });
  const latencies: number[] = [];
  const stamp = defineTask({
    name: 'stamp',
    payload: z.object({ t: z.number() }),
    handler: (payload) => {
      latencies.push(performance.now() - payload.t);
    },
  });
  const skiplock = createSkiplock({ sql, tasks: [stamp], log: silent, retention: false });
  const stop = new AbortController();
  try {
    if (p.mode === 'poll') {
      const ticking = skiplock.tick({ budgetMs: 600_000, concurrency: 100, pollIntervalMs: p.pollIntervalMs, signal: stop.signal });
      await enqueueSteadily(p.rate, p.samples, (_, t) => skiplock.enqueue({ task: 'stamp', payload: { t } }));
      await waitFor(() => latencies.length >= p.samples, 'every job to start');
      stop.abort();
      await ticking;
    } else {
      const ticks: Promise<unknown>[] = [];
      await enqueueSteadily(p.rate, p.samples, async (_, t) => {
        await skiplock.enqueue({ task: 'stamp', payload: { t } });
        ticks.push(skiplock.tick({ untilIdle: true, concurrency: 100 }));
      });
      await Promise.all(ticks);
    }
    const config = p.mode === 'poll' ? `one tick polling every ${p.pollIntervalMs ?? 500} ms` : 'a tick after each enqueue (waitUntil)';
    return latencyResult('skiplock', config, latencies);
  } finally {
    stop.abort();
    await sql.close();
  }
}

export interface MemoryResult {
  backlog: number;
  concurrency: number;
  ms: number;
  jobsPerSec: number;
  baselineRssMb: number;
  peakRssMb: number;
  baselineHeapMb: number;
  peakHeapMb: number;
  /** Heap after the tick returned and a full GC: what the tick kept (a leak would show here). */
  afterGcHeapMb: number;
}

/** One tick draining a backlog inserted by SQL (so the baseline heap holds none of it), sampling memory. */
export async function skiplockTickMemory(p: { url: string; backlog: number; concurrency: number }): Promise<MemoryResult> {
  const sql = createPgDriver(p.url, { max: 2 });
  const noop = defineTask({ name: 'noop', payload: z.object({}), handler: () => {} });
  const skiplock = createSkiplock({ sql, tasks: [noop], log: silent, retention: false });
  try {
    await sql.query({
      text: seeded(`INSERT INTO skiplock.job_record (task, payload) SELECT 'noop', '{}'::jsonb FROM generate_series(1, $1)`),
      values: [p.backlog],
    });
    await sql.query({ text: `VACUUM ANALYZE skiplock.job_record, skiplock.queue`, values: [] });
    (globalThis as { gc?: () => void }).gc?.();
    const mb = (n: number) => Math.round((n / 2 ** 20) * 10) / 10;
    const base = process.memoryUsage();
    let peakRss = base.rss;
    let peakHeap = base.heapUsed;
    const sample = setInterval(() => {
      const m = process.memoryUsage();
      peakRss = Math.max(peakRss, m.rss);
      peakHeap = Math.max(peakHeap, m.heapUsed);
    }, 5);
    const t0 = performance.now();
    const result = await skiplock.tick({ untilIdle: true, concurrency: p.concurrency, budgetMs: 600_000 });
    const ms = performance.now() - t0;
    clearInterval(sample);
    (globalThis as { gc?: () => void }).gc?.();
    const afterGc = process.memoryUsage().heapUsed;
    if (result.done !== p.backlog) throw new Error(`tick finished ${result.done} of ${p.backlog}`);
    return {
      backlog: p.backlog,
      concurrency: p.concurrency,
      ms: Math.round(ms),
      jobsPerSec: Math.round((p.backlog / ms) * 1000),
      baselineRssMb: mb(base.rss),
      peakRssMb: mb(peakRss),
      baselineHeapMb: mb(base.heapUsed),
      peakHeapMb: mb(peakHeap),
      afterGcHeapMb: mb(afterGc),
    };
  } finally {
    await sql.close();
  }
}
