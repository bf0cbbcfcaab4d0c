/**
 * `npm run bench`: skiplock beside pg-boss, graphile-worker and the raw-SQL floor, on one
 * embedded PostgreSQL, in one run. Each measurement runs in a child process of its own
 * (child.ts) against a fresh database. Throughput configurations are interleaved in rounds and
 * the median of the rounds is reported, so that background load on the machine weighs on every
 * system alike. Each database is VACUUM ANALYZEd after its jobs are enqueued (steady state, as
 * after autovacuum), except one skiplock run on a just-filled table with no statistics yet. Writes test/bench/results/latest.{md,json} and throughput.svg.
 *
 *   BENCH_QUICK=1 npm run bench     a smaller run (fewer jobs and rounds, 100k history) to try changes
 *   BENCH_ONLY=throughput,neon      only these parts (throughput, curve, fsync, neon, latency, claims, memory, flow);
 *                                   prints the tables instead of writing results/
 *   npm run bench -- --flow         also the flow-control scenarios (issue 14: per-key concurrency
 *                                   with 1, 100 and 10,000 keys, a rate limit that never throttles,
 *                                   and the plain path beside them); BENCH_FLOW=1 does the same.
 *                                   Written to results/flow.{md,json}; latest.* is left as it was
 *   npm run bench -- --streams      also streams (issue 34: write → reader latency, statements a minute
 *                                   per open stream, 100 readers of one job; streams.ts, also
 *                                   `npm run bench:streams` alone); BENCH_STREAMS=1 does the same.
 *                                   Written to results/streams.{md,json}
 */
import { cpus, loadavg, totalmem } from 'node:os';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { runInChild } from './child.ts';
import type { ClaimStepResult } from './claim-latency.ts';
import type { LatencyResult, ThroughputResult } from './harness.ts';
import { writeResults, type BenchResults, type NeonRoundTripResult, type ThroughputSummary } from './report.ts';
import type { FlowParams } from './skiplock.ts';
import { startBenchServer, type BenchServer } from './server.ts';
import { runStreamsBench, writeStreamsResults } from './streams.ts';

const QUICK = process.env.BENCH_QUICK === '1';
const JOBS = QUICK ? 5_000 : 20_000;
const CONCURRENCY = 100;
const ROUNDS = Number(process.env.BENCH_ROUNDS) || (QUICK ? 1 : 3);
const HISTORY = QUICK ? [0, 100_000] : [0, 100_000, 1_000_000, 10_000_000];
const BACKLOG = QUICK ? 100_000 : 1_000_000;
const MEMORY_BACKLOG = QUICK ? 20_000 : 100_000;
const LATENCY = { rate: 100, samples: QUICK ? 200 : 500 };
/** The concurrency curve's backlog (issue 17: 100k). */
const CURVE_JOBS = QUICK ? 10_000 : 100_000;
/** Concurrent ticks on the curve, and the slots of each (issue 17's shapes: × 100 up to 4 ticks, × 25 beyond). */
const CURVE_TICKS = QUICK ? [1, 4, 48] : [1, 4, 16, 48, 96];
const perTickOf = (ticks: number) => (ticks <= 4 ? 100 : 25);
/** Connections of the raw-SQL floors on the curve. */
const RAW_CONNECTIONS = QUICK ? [1, 8] : [1, 4, 8];
const ONLY = process.env.BENCH_ONLY?.split(',').map((p) => p.trim()).filter(Boolean);
/** The flow-control part runs only when asked for (it adds minutes: the 1-key run claims 5 jobs at a time). */
const FLOW = process.argv.includes('--flow') || process.env.BENCH_FLOW === '1' || (ONLY?.includes('flow') ?? false);
/** The streams part runs only when asked for (it adds minutes of fixed windows). */
const STREAMS = process.argv.includes('--streams') || process.env.BENCH_STREAMS === '1' || (ONLY?.includes('streams') ?? false);
/** Runs a part unless BENCH_ONLY leaves it out. */
const part = <T,>(name: string, run: () => Promise<T>, skipped: T): Promise<T> =>
  (name === 'flow' ? FLOW : name === 'streams' ? STREAMS : !ONLY || ONLY.includes(name)) ? run() : Promise.resolve(skipped);

type Server = Pick<BenchServer, 'adminUrl' | 'postmasterPid'>;
type Configured = { key: string; kind: 'skiplock' | 'empty'; run: (url: string, server: Server) => Promise<ThroughputResult> };

const base = (url: string, s: Server, jobs = JOBS) => ({ url, adminUrl: s.adminUrl, postmasterPid: s.postmasterPid, jobs, concurrency: CONCURRENCY });

/** Every throughput configuration, each with the same total concurrency. */
const THROUGHPUT: Configured[] = [
  { key: 'raw', kind: 'skiplock', run: (u, a) => runInChild('rawSqlThroughput', base(u, a)) },
  { key: 'raw-8', kind: 'skiplock', run: (u, a) => runInChild('rawSqlThroughput', { ...base(u, a), connections: 8 }) },
  { key: 'skiplock-1', kind: 'skiplock', run: (u, a) => runInChild('skiplockThroughput', { ...base(u, a), ticks: 1 }) },
  { key: 'skiplock-2', kind: 'skiplock', run: (u, a) => runInChild('skiplockThroughput', { ...base(u, a), ticks: 2 }) },
  { key: 'skiplock-4x100', kind: 'skiplock', run: (u, a) => runInChild('skiplockThroughput', { ...base(u, a), ticks: 4, perTick: 100 }) },
  { key: 'skiplock-default', kind: 'skiplock', run: (u, a) => runInChild('skiplockThroughput', { ...base(u, a), ticks: 1, perTick: 'default' }) },
  { key: 'skiplock-fresh', kind: 'skiplock', run: (u, a) => runInChild('skiplockThroughput', { ...base(u, a), ticks: 1, tableStats: 'fresh' }) },
  { key: 'pg-boss-1', kind: 'empty', run: (u, a) => runInChild('pgBossThroughput', { ...base(u, a), localConcurrency: 1 }) },
  { key: 'pg-boss-2', kind: 'empty', run: (u, a) => runInChild('pgBossThroughput', { ...base(u, a), localConcurrency: 2 }) },
  { key: 'pg-boss-4', kind: 'empty', run: (u, a) => runInChild('pgBossThroughput', { ...base(u, a), localConcurrency: 4 }) },
  { key: 'graphile-101', kind: 'empty', run: (u, a) => runInChild('graphileThroughput', { ...base(u, a), localQueueSize: CONCURRENCY + 1 }) },
  { key: 'graphile-500', kind: 'empty', run: (u, a) => runInChild('graphileThroughput', { ...base(u, a), localQueueSize: 500 }) },
];

/**
 * The concurrency curve (issue 17), at a 100,000-job backlog: skiplock with 1, 4, 16, 48 and 96
 * ticks at once (× 100 slots up to 4 ticks, × 25 beyond: many small concurrent invocations, the
 * serverless shape), one tick at the default concurrency, the raw-SQL floor on 1, 4 and 8
 * connections, and the peers at their best tunings of the 20k table (pg-boss 2 × 50,
 * graphile-worker local queue 500).
 */
const CURVE: Configured[] = [
  ...CURVE_TICKS.map((ticks): Configured => ({
    key: `curve-${ticks}x${perTickOf(ticks)}`,
    kind: 'skiplock',
    run: (u, a) => runInChild('skiplockThroughput', { ...base(u, a, CURVE_JOBS), ticks, perTick: perTickOf(ticks) }),
  })),
  { key: 'curve-default', kind: 'skiplock', run: (u, a) => runInChild('skiplockThroughput', { ...base(u, a, CURVE_JOBS), ticks: 1, perTick: 'default' }) },
  ...RAW_CONNECTIONS.map((connections): Configured => ({
    key: `curve-raw-${connections}`,
    kind: 'skiplock',
    run: (u, a) => runInChild('rawSqlThroughput', { ...base(u, a, CURVE_JOBS), connections }),
  })),
  { key: 'curve-pg-boss-2', kind: 'empty', run: (u, a) => runInChild('pgBossThroughput', { ...base(u, a, CURVE_JOBS), localConcurrency: 2 }) },
  { key: 'curve-graphile-500', kind: 'empty', run: (u, a) => runInChild('graphileThroughput', { ...base(u, a, CURVE_JOBS), localQueueSize: 500 }) },
];

/**
 * With fsync on (a second server: fsync, synchronous_commit and full_page_writes on, as in
 * production), the 20k table's main configurations, to put beside their fsync-off figures.
 */
const FSYNC_KEYS = ['raw', 'raw-8', 'skiplock-1', 'skiplock-4x100', 'skiplock-default', 'pg-boss-2', 'graphile-500'];
const FSYNC: Configured[] = [
  ...THROUGHPUT.filter((c) => FSYNC_KEYS.includes(c.key)),
  { key: 'skiplock-48x25', kind: 'skiplock', run: (u, a) => runInChild('skiplockThroughput', { ...base(u, a), ticks: 48, perTick: 25 }) },
];

/**
 * Flow control (issue 14), on the same 20,000 no-op jobs and one tick × concurrency 100: the plain
 * task again (the comparison within this run), a concurrency limit of 5 per key over 1, 100 and
 * 10,000 keys, and a rate limit of 100,000 starts per second (one key) that never throttles, so
 * what it shows is the limit's bookkeeping.
 */
const FLOW_CONFIGS: { key: string; flow?: FlowParams }[] = [
  { key: 'flow-plain' },
  { key: 'flow-c5-k1', flow: { concurrencyLimit: 5, keys: 1 } },
  { key: 'flow-c5-k100', flow: { concurrencyLimit: 5, keys: 100 } },
  { key: 'flow-c5-k10000', flow: { concurrencyLimit: 5, keys: 10_000 } },
  { key: 'flow-rate-100k', flow: { rateLimit: { limit: 100_000, periodMs: 1_000 } } },
];
const FLOW_THROUGHPUT: Configured[] = FLOW_CONFIGS.map(({ key, flow }) => ({
  key,
  kind: 'skiplock',
  run: (u, a) => runInChild('skiplockThroughput', { ...base(u, a), ticks: 1, flow: flow ?? {} }),
}));

let databases = 0;
const newDatabase = (server: BenchServer, kind: 'skiplock' | 'empty') => server.createDatabase(`bench_${kind}_${++databases}`, kind);

function log(message: string) {
  process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${message}\n`);
}

function median(values: readonly number[]): number {
  const s = [...values].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
}

function summarize(key: string, runs: ThroughputResult[], loads: number[] = []): ThroughputSummary {
  const sorted = [...runs].sort((a, b) => a.jobsPerSec - b.jobsPerSec);
  const mid = sorted[Math.floor((sorted.length - 1) / 2)]!;
  for (const r of runs) if (r.completed !== r.jobs || r.handled !== r.jobs) throw new Error(`${key}: ${r.completed}/${r.handled} of ${r.jobs} jobs`);
  const med = (pick: (r: ThroughputResult) => number | undefined) => {
    const values = runs.map(pick).filter((v): v is number => v !== undefined);
    return values.length ? Math.round(median(values) * 10) / 10 : undefined;
  };
  return {
    key,
    ...mid,
    jobsPerSec: Math.round(median(runs.map((r) => r.jobsPerSec))),
    clientCpuMsPerKJob: med((r) => r.clientCpuMsPerKJob),
    serverCpuMsPerKJob: med((r) => r.serverCpuMsPerKJob),
    serverStatementMsPerKJob: med((r) => r.serverStatementMsPerKJob),
    rounds: runs.map((r) => r.jobsPerSec),
    loads,
  };
}

async function throughput(server: BenchServer, configs = THROUGHPUT, label = 'throughput'): Promise<ThroughputSummary[]> {
  const runs = new Map<string, ThroughputResult[]>(configs.map((c) => [c.key, []]));
  const loads = new Map<string, number[]>(configs.map((c) => [c.key, []]));
  for (let round = 1; round <= ROUNDS; round++) {
    // A different order each round, so that no configuration always runs first or last.
    const order = configs.map((c, i) => configs[(i + round - 1) % configs.length]!);
    for (const c of order) {
      const load = Math.round(loadavg()[0]! * 100) / 100;
      const r = await c.run(await newDatabase(server, c.kind), server);
      runs.get(c.key)!.push(r);
      loads.get(c.key)!.push(load);
      log(`${label} round ${round}: ${c.key} ${r.jobsPerSec} jobs/s (load ${load}), CPU ${r.clientCpuMsPerKJob} + ${r.serverCpuMsPerKJob} ms/1k, ${r.roundTripsPerJob} round trips/job, ${r.roundTripsPerBatch ?? '–'} per batch (mean ${r.meanBatch ?? '–'})`);
    }
  }
  return configs.map((c) => summarize(c.key, runs.get(c.key)!, loads.get(c.key)!));
}

async function neonHttp(server: BenchServer): Promise<{ summary?: ThroughputSummary; note?: string }> {
  const proxyFile = fileURLToPath(new URL('../../src/dev/neon-proxy.ts', import.meta.url));
  if (!existsSync(proxyFile)) return { note: 'src/dev/neon-proxy.ts is not there yet: no Neon HTTP figure' };
  const { startNeonProxy } = (await import(proxyFile)) as typeof import('../../src/dev/neon-proxy.ts');
  const proxy = await startNeonProxy();
  try {
    const runs: ThroughputResult[] = [];
    for (let round = 1; round <= ROUNDS; round++) {
      const url = await newDatabase(server, 'skiplock');
      const r = await runInChild('skiplockThroughput', { ...base(url, server), ticks: 1, driver: 'neon-http', fetchEndpoint: proxy.fetchEndpoint });
      runs.push(r);
      log(`neon http round ${round}: ${r.jobsPerSec} jobs/s`);
    }
    return { summary: summarize('skiplock-neon-http', runs) };
  } finally {
    await proxy.close();
  }
}

/**
 * Over Neon's HTTP driver with the network in the way (issue 23): the local proxy answers every
 * statement `roundTripMs` later, as Neon a round trip away would; one tick at concurrency 5 (the
 * Worker default) and 25, 60 claims' worth of jobs each (20 in a quick run). What users size a
 * deployment by: jobs/s of one invocation, and the statements (HTTP requests) per job.
 */
const NEON_ROUND_TRIPS_MS = [5, 20, 50];
const NEON_CONCURRENCIES = [5, 25];
async function neonRoundTrips(server: BenchServer): Promise<NeonRoundTripResult[]> {
  const { startNeonProxy } = await import('../../src/dev/neon-proxy.ts');
  const out: NeonRoundTripResult[] = [];
  for (const roundTripMs of NEON_ROUND_TRIPS_MS) {
    const proxy = await startNeonProxy({ roundTripMs });
    try {
      for (const concurrency of NEON_CONCURRENCIES) {
        const runs: ThroughputResult[] = [];
        for (let round = 1; round <= ROUNDS; round++) {
          const url = await newDatabase(server, 'skiplock');
          const jobs = concurrency * (QUICK ? 20 : 60);
          const r = await runInChild('skiplockThroughput', { ...base(url, server, jobs), concurrency, ticks: 1, driver: 'neon-http', fetchEndpoint: proxy.fetchEndpoint });
          runs.push(r);
          log(`neon round trip ${roundTripMs} ms, concurrency ${concurrency}, round ${round}: ${r.jobsPerSec} jobs/s, ${r.roundTripsPerJob} statements/job`);
        }
        out.push({ roundTripMs, concurrency, summary: summarize(`neon-rtt-${roundTripMs}-c${concurrency}`, runs) });
      }
    } finally {
      await proxy.close();
    }
  }
  return out;
}

async function latency(server: BenchServer): Promise<LatencyResult[]> {
  const out: LatencyResult[] = [];
  const skiplock = (mode: 'poll' | 'enqueue-and-tick', pollIntervalMs?: number) => async () =>
    runInChild('skiplockLatency', { url: await newDatabase(server, 'skiplock'), ...LATENCY, mode, pollIntervalMs });
  const runs: [string, () => Promise<LatencyResult>][] = [
    ['skiplock poll 500 ms', skiplock('poll', 500)],
    ['skiplock poll 50 ms', skiplock('poll', 50)],
    ['skiplock enqueue+tick', skiplock('enqueue-and-tick')],
    ['pg-boss', async () => runInChild('pgBossLatency', { url: await newDatabase(server, 'empty'), ...LATENCY, concurrency: CONCURRENCY })],
    ['graphile-worker', async () => runInChild('graphileLatency', { url: await newDatabase(server, 'empty'), ...LATENCY, concurrency: CONCURRENCY })],
  ];
  for (const [name, run] of runs) {
    const r = await run();
    out.push(r);
    log(`latency ${name}: p50 ${r.p50Ms} ms, p99 ${r.p99Ms} ms`);
  }
  return out;
}

async function claims(server: BenchServer): Promise<ClaimStepResult[]> {
  const history = await runInChild('claimLatency', {
    url: await newDatabase(server, 'skiplock'),
    steps: HISTORY.map((doneRows) => ({ label: `${doneRows.toLocaleString('en')} DONE rows`, doneRows, queuedRows: 25_000 })),
  });
  const backlog = await runInChild('claimLatency', {
    url: await newDatabase(server, 'skiplock'),
    steps: [{ label: `${BACKLOG.toLocaleString('en')} QUEUED backlog`, doneRows: 0, queuedRows: BACKLOG }],
  });
  // The same backlog arriving as a burst into a table last analyzed before it (autovacuum has not run yet).
  const burst = await runInChild('claimLatency', {
    url: await newDatabase(server, 'skiplock'),
    steps: [{ label: `${BACKLOG.toLocaleString('en')} QUEUED burst, stale statistics`, doneRows: 10_000, queuedRows: BACKLOG, stats: 'stale', iterations: 10 }],
  });
  const all = [...history, ...backlog, ...burst];
  for (const s of all) log(`claim latency, ${s.label}: p50 ${s.p50Ms} ms, p99 ${s.p99Ms} ms`);
  return all;
}

async function memory(server: BenchServer) {
  const m = await runInChild('skiplockTickMemory', { url: await newDatabase(server, 'skiplock'), backlog: MEMORY_BACKLOG, concurrency: CONCURRENCY });
  log(`tick memory with ${MEMORY_BACKLOG} backlog: peak RSS ${m.peakRssMb} MB, peak heap ${m.peakHeapMb} MB`);
  return m;
}

/** A second server with fsync on, for the fsync part; stopped after it. */
async function withDurableServer<T>(run: (server: BenchServer) => Promise<T>): Promise<T> {
  log('starting PostgreSQL with fsync on');
  const durable = await startBenchServer({ durable: true });
  try {
    return await run(durable);
  } finally {
    await durable.stop();
  }
}

async function main() {
  const started = performance.now();
  const load = [loadavg()[0]!];
  log(`starting PostgreSQL (${QUICK ? 'quick run' : 'full run'})`);
  const server = await startBenchServer();
  try {
    const results: BenchResults = {
      date: new Date().toISOString(),
      quick: QUICK,
      machine: {
        cpus: cpus().length,
        cpuModel: cpus()[0]?.model ?? '?',
        memoryGb: Math.round(totalmem() / 2 ** 30),
        node: process.version,
        postgres: server.version,
        loadAverage: [],
      },
      params: { jobs: JOBS, concurrency: CONCURRENCY, rounds: ROUNDS, latency: LATENCY, memoryBacklog: MEMORY_BACKLOG, curveJobs: CURVE_JOBS },
      roundTripCounting: server.statStatements
        ? 'client: every query() on a pg.Client of the database under test; server: pg_stat_statements calls for that database'
        : 'client: every query() on a pg.Client of the database under test (pg_stat_statements not available)',
      throughput: await part('throughput', () => throughput(server), []),
      curve: await part('curve', () => throughput(server, CURVE, 'curve'), undefined),
      fsyncOn: await part('fsync', () => withDurableServer((durable) => throughput(durable, FSYNC, 'fsync on')), undefined),
      neonHttp: await part('neon', () => neonHttp(server), { note: 'not run' }),
      neonRoundTrips: await part('neon', () => neonRoundTrips(server), undefined),
      latency: await part('latency', () => latency(server), []),
      claimLatency: await part('claims', () => claims(server), []),
      memory: await part('memory', () => memory(server), undefined),
      flow: await part('flow', () => throughput(server, FLOW_THROUGHPUT, 'flow control'), undefined),
      seconds: 0,
    };
    const streams = await part('streams', () => runStreamsBench(server), undefined);
    if (streams) log(`streams: ${(await writeStreamsResults(streams)).join(', ')}`);
    load.push(loadavg()[0]!);
    results.machine.loadAverage = load.map((l) => Math.round(l * 100) / 100);
    results.seconds = Math.round((performance.now() - started) / 1000);
    if (ONLY) {
      process.stdout.write(`${JSON.stringify(results, null, 2)}\n`);
      log(`done in ${results.seconds} s (BENCH_ONLY: results/ left as it was)`);
    } else {
      const written = await writeResults(results);
      log(`done in ${results.seconds} s: ${written.join(', ')}`);
    }
  } finally {
    await server.stop();
  }
}

await main();
