/**
 * The benchmarks' quick variant: every system and measurement of `npm run bench`, on a few
 * hundred jobs, checked for correctness only (every job ran once and is recorded finished,
 * counts add up). No timing is asserted: this machine's timings are not a test's business.
 */
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterAll, expect, test } from 'vitest';
import { createTestDb, type TestDb } from '../support/db.ts';
import { claimLatency } from './claim-latency.ts';
import { graphileLatency, graphileThroughput } from './graphile-worker.ts';
import type { ThroughputResult } from './harness.ts';
import { pgBossLatency, pgBossThroughput } from './pg-boss.ts';
import { rawSqlThroughput } from './raw-sql.ts';
import { targets, toCurveSvg, toMarkdown, toSvg, type BenchResults } from './report.ts';
import { skiplockLatency, skiplockThroughput, skiplockTickMemory } from './skiplock.ts';

const JOBS = 300;
const CONCURRENCY = 100;
const dbs: TestDb[] = [];
afterAll(() => Promise.all(dbs.map((db) => db.drop())));

async function db(migrated = true): Promise<string> {
  const created = await createTestDb({ migrated });
  dbs.push(created);
  return created.url;
}

function expectAllDone(r: ThroughputResult) {
  expect(r).toMatchObject({ jobs: JOBS, completed: JOBS, handled: JOBS });
  expect(r.roundTrips).toBeGreaterThan(0);
}

/** Each system's run, keyed as run.ts keys them, for the report test. */
const runs: { key: string; result: ThroughputResult }[] = [];

test('raw SQL floor: every job claimed once and written DONE, one round trip per batch', async () => {
  const r = await rawSqlThroughput({ url: await db(), jobs: JOBS, concurrency: CONCURRENCY });
  expectAllDone(r);
  // 3 claiming round trips and the one that finds nothing left.
  expect(r).toMatchObject({ claimBatches: 3, roundTrips: 4 });
  runs.push({ key: 'raw', result: r });
});

test('raw SQL floor on 4 connections: every job claimed once, each loop on its own connection', async () => {
  const r = await rawSqlThroughput({ url: await db(), jobs: JOBS, concurrency: 25, connections: 4 });
  expectAllDone(r);
  expect(r.config).toContain('4 connections');
  // At least 12 claiming round trips of 25 in all (a loop whose claim meets rows another loop's
  // in-flight claim holds skips them, SKIP LOCKED, and takes a short batch: 13 seen in a CI run),
  // and one per loop that finds nothing left: one round trip per batch either way.
  expect(r.claimBatches).toBeGreaterThanOrEqual(12);
  expect(r.roundTrips).toBe(r.claimBatches! + 4);
  runs.push({ key: 'raw-8', result: r });
});

test('skiplock (one tick, and two ticks at once): every job done, claims batched', async () => {
  const one = await skiplockThroughput({ url: await db(), jobs: JOBS, concurrency: CONCURRENCY });
  expectAllDone(one);
  expect(one.claimBatches).toBeGreaterThanOrEqual(3);
  expect(one.roundTripsPerBatch).toBeLessThanOrEqual(2);
  const two = await skiplockThroughput({ url: await db(), jobs: JOBS, concurrency: CONCURRENCY, ticks: 2 });
  expectAllDone(two);
  runs.push({ key: 'skiplock-1', result: one }, { key: 'skiplock-2', result: two });
});

test('skiplock, many small ticks at once and the default concurrency: every job done once', async () => {
  const many = await skiplockThroughput({ url: await db(), jobs: JOBS, concurrency: CONCURRENCY, ticks: 12, perTick: 25 });
  expectAllDone(many);
  expect(many.config).toContain('12 ticks × concurrency 25');
  expect(many.meanBatch).toBeLessThanOrEqual(25);
  const byDefault = await skiplockThroughput({ url: await db(), jobs: JOBS, concurrency: CONCURRENCY, perTick: 'default' });
  expectAllDone(byDefault);
  expect(byDefault.config).toContain('concurrency 10 (the default)');
  expect(byDefault.meanBatch).toBeLessThanOrEqual(10);
  runs.push({ key: 'skiplock-default', result: byDefault });
});

test('skiplock with flow control (concurrency per key, rate limit): every job done, batches no larger than the keys allow', async () => {
  const oneKey = await skiplockThroughput({ url: await db(), jobs: JOBS, concurrency: CONCURRENCY, flow: { concurrencyLimit: 5, keys: 1 } });
  expectAllDone(oneKey);
  expect(oneKey.config).toContain('concurrency limit 5 per key, 1 key');
  expect(oneKey.meanBatch).toBeLessThanOrEqual(5);
  const manyKeys = await skiplockThroughput({ url: await db(), jobs: JOBS, concurrency: CONCURRENCY, flow: { concurrencyLimit: 5, keys: 100 } });
  expectAllDone(manyKeys);
  const rate = await skiplockThroughput({ url: await db(), jobs: JOBS, concurrency: CONCURRENCY, flow: { rateLimit: { limit: 100_000, periodMs: 1_000 } } });
  expectAllDone(rate);
  expect(rate.config).toContain('rate limit 100,000 / 1000 ms');
});

test('pg-boss, batched with burst: every job completed once', async () => {
  const r = await pgBossThroughput({ url: await db(false), jobs: JOBS, concurrency: CONCURRENCY, localConcurrency: 2 });
  expectAllDone(r);
  expect(r.config).toContain('batchSize 50');
  runs.push({ key: 'pg-boss-2', result: r });
});

test('graphile-worker, local queue and batched completion: every job completed once', async () => {
  const r = await graphileThroughput({ url: await db(false), jobs: JOBS, concurrency: CONCURRENCY, localQueueSize: 101 });
  expectAllDone(r);
  runs.push({ key: 'graphile-101', result: r });
});

test('skiplock over the Neon HTTP driver (local proxy): every job done', async () => {
  const proxyFile = fileURLToPath(new URL('../../src/dev/neon-proxy.ts', import.meta.url));
  if (!existsSync(proxyFile)) return;
  const { startNeonProxy } = (await import(proxyFile)) as typeof import('../../src/dev/neon-proxy.ts');
  const proxy = await startNeonProxy();
  try {
    const r = await skiplockThroughput({ url: await db(), jobs: JOBS, concurrency: CONCURRENCY, driver: 'neon-http', fetchEndpoint: proxy.fetchEndpoint });
    expectAllDone(r);
    expect(r.roundTripsPerBatch).toBeLessThanOrEqual(2);
  } finally {
    await proxy.close();
  }
});

test('enqueue→start latency: every enqueued job starts once, for each system', async () => {
  const params = { rate: 200, samples: 20 };
  const results = [
    await skiplockLatency({ url: await db(), ...params, mode: 'poll', pollIntervalMs: 50 }),
    await skiplockLatency({ url: await db(), ...params, mode: 'enqueue-and-tick' }),
    await pgBossLatency({ url: await db(false), ...params }),
    await graphileLatency({ url: await db(false), ...params }),
  ];
  for (const r of results) {
    expect(r.samples).toBe(params.samples);
    expect(r.p50Ms).toBeGreaterThanOrEqual(0);
    expect(r.p99Ms).toBeGreaterThanOrEqual(r.p50Ms);
  }
});

test('claim latency: steps top the table up to the asked row counts and time the statement', async () => {
  const url = await db();
  const steps = await claimLatency({
    url,
    steps: [
      { label: 'small', doneRows: 0, queuedRows: 500 },
      { label: 'with history', doneRows: 2_000, queuedRows: 500 },
    ],
    iterations: 3,
  });
  expect(steps).toHaveLength(2);
  for (const s of steps) {
    expect(s.p50Ms).toBeGreaterThan(0);
    expect(s.plan).toContain('Execution Time');
  }
  const [counts] = (await dbs.at(-1)!.sql.query({ text: `SELECT count(*) FILTER (WHERE status = 'DONE') AS done, count(*) FILTER (WHERE status = 'RUNNING') AS running FROM skiplock.job`, values: [] })) as { done: string; running: string }[];
  // 13 claims of 100 per step; everything claimed in step 1 was written DONE before step 2 topped up.
  expect(Number(counts!.done)).toBeGreaterThanOrEqual(2_000);
  expect(Number(counts!.running)).toBeLessThanOrEqual(100);
});

test('tick memory: the tick drains the whole backlog', async () => {
  const m = await skiplockTickMemory({ url: await db(), backlog: JOBS, concurrency: CONCURRENCY });
  expect(m.backlog).toBe(JOBS);
  expect(m.peakRssMb).toBeGreaterThanOrEqual(m.baselineRssMb);
});

test('report: markdown, targets and SVG from a run', () => {
  const keyed = runs.map(({ key, result }) => ({ ...result, key, rounds: [result.jobsPerSec] }));
  expect(keyed).toHaveLength(7);
  const results: BenchResults = {
    date: new Date().toISOString(),
    quick: true,
    machine: { cpus: 2, cpuModel: 'test', memoryGb: 1, node: process.version, postgres: '18', loadAverage: [0] },
    params: { jobs: JOBS, concurrency: CONCURRENCY, rounds: 1, latency: { rate: 1, samples: 1 }, memoryBacklog: JOBS },
    roundTripCounting: 'client',
    throughput: keyed,
    neonHttp: { note: 'not run' },
    latency: [],
    claimLatency: [{ label: '0', doneRows: 0, queuedRows: 1, p50Ms: 1, p99Ms: 1, meanMs: 1, explainMs: 1, plan: '', insertMs: 0 }],
    memory: undefined,
    seconds: 0,
  };
  // best and default shape against pg-boss and graphile-worker at 20k, one tick against the raw floor, round trips, claim latency
  expect(targets(results)).toHaveLength(7);
  expect(toMarkdown(results)).not.toContain('## Flow control');
  expect(toMarkdown(results)).not.toContain('## Concurrency curve');
  const at = (key: string) => keyed.find((k) => k.key === key)!;
  results.params.curveJobs = JOBS;
  results.curve = [
    { ...at('skiplock-1'), key: 'curve-1x100' },
    { ...at('skiplock-2'), key: 'curve-4x100' },
    { ...at('skiplock-2'), key: 'curve-48x25' },
    { ...at('skiplock-default'), key: 'curve-default' },
    { ...at('raw'), key: 'curve-raw-1' },
    { ...at('raw-8'), key: 'curve-raw-8' },
    { ...at('pg-boss-2'), key: 'curve-pg-boss-2' },
    { ...at('graphile-101'), key: 'curve-graphile-500' },
  ];
  results.fsyncOn = [{ ...at('skiplock-1'), key: 'skiplock-1' }];
  expect(targets(results).map((t) => t.target).join('\n')).toContain('48 ticks × 25 (the serverless shape) ≥ 0.8× 4 ticks × 100');
  const curveSvg = toCurveSvg(results);
  expect(curveSvg.startsWith('<svg')).toBe(true);
  expect(curveSvg.match(/<circle /g)).toHaveLength(3);
  const withCurve = toMarkdown(results);
  expect(withCurve).toContain('## Concurrency curve');
  expect(withCurve).toContain('## fsync on and off');
  delete results.curve;
  delete results.fsyncOn;
  results.flow = [{ ...keyed[1]!, key: 'flow-plain' }, { ...keyed[1]!, key: 'flow-c5-k1', config: 'concurrency limit 5 per key, 1 key' }];
  const md = toMarkdown(results);
  expect(md).toContain('## Flow control');
  expect(md).toContain('| concurrency limit 5 per key, 1 key |');
  for (const system of ['raw SQL floor', 'skiplock', 'pg-boss', 'graphile-worker']) expect(md).toContain(`| ${system} |`);
  const svg = toSvg(results);
  expect(svg.startsWith('<svg')).toBe(true);
  expect(svg.trim().endsWith('</svg>')).toBe(true);
  expect(svg.match(/<rect /g)).toHaveLength(keyed.length + 1);
});
