/**
 * pg-boss 12, tuned as its docs describe for throughput: work() fetches `batchSize` jobs per
 * query and hands them to the handler as one array (completed together in one query);
 * `burstWhenBatchFull` fetches again at once while batches come back full; `localConcurrency`
 * runs several such fetch loops. Concurrency = localConcurrency × batchSize.
 * LISTEN/NOTIFY (`useListenNotify` + queue `notify`) wakes idle workers at once.
 */
import { PgBoss } from 'pg-boss';
import {
  countPgQueries,
  openChecker,
  databaseOf,
  enqueueSteadily,
  finishResult,
  latencyResult,
  readServerCounters,
  analyzeDatabase,
  waitFor,
  type LatencyParams,
  type LatencyResult,
  type ThroughputParams,
  type ThroughputResult,
} from './harness.ts';

const QUEUE = 'noop';

export interface PgBossThroughputParams extends ThroughputParams {
  /** Fetch loops; concurrency / localConcurrency jobs per fetch. Default 1. */
  localConcurrency?: number;
}

async function startBoss(url: string, poolSize: number): Promise<PgBoss> {
  const boss = new PgBoss({ connectionString: url, max: poolSize, useListenNotify: true });
  boss.on('error', (error: unknown) => console.error('[pg-boss]', error));
  await boss.start();
  await boss.createQueue(QUEUE, { notify: true });
  return boss;
}

export async function pgBossThroughput(p: PgBossThroughputParams): Promise<ThroughputResult> {
  const localConcurrency = p.localConcurrency ?? 1;
  const batchSize = Math.floor(p.concurrency / localConcurrency);
  const database = databaseOf(p.url);
  const counter = countPgQueries();
  const boss = await startBoss(p.url, Math.max(10, localConcurrency + 4));
  try {
    for (let from = 0; from < p.jobs; from += 5_000) {
      await boss.insert(QUEUE, Array.from({ length: Math.min(5_000, p.jobs - from) }, () => ({ data: {} })));
    }
    const checker = await openChecker(p.url);
    if (p.tableStats !== 'fresh') await analyzeDatabase(p.url);
    const before = await readServerCounters(p.adminUrl, database, p.postmasterPid);
    counter.reset(database);
    let handled = 0;
    let firstStart = 0;
    await boss.work(QUEUE, { batchSize, localConcurrency, burstWhenBatchFull: true, pollingIntervalSeconds: 0.5 }, async (jobs) => {
      if (handled === 0) firstStart = performance.now();
      await Promise.all(jobs.map(async () => void (handled += 1)));
    });
    await waitFor(() => handled >= p.jobs, 'every pg-boss job to run');
    const completedSql = `SELECT count(*) AS n FROM pgboss.job WHERE name = $1 AND state = 'completed'`;
    await waitFor(async () => (await checker.count(completedSql, [QUEUE])) >= p.jobs, 'pg-boss to record every completion', 60_000, 5);
    const ms = performance.now() - firstStart;
    const roundTrips = counter.read(database);
    const after = await readServerCounters(p.adminUrl, database, p.postmasterPid);
    return finishResult(
      {
        system: 'pg-boss',
        config: `localConcurrency ${localConcurrency} × batchSize ${batchSize}, burstWhenBatchFull, LISTEN/NOTIFY`,
        jobs: p.jobs,
        completed: await checker.count(completedSql, [QUEUE]).finally(() => checker.close()),
        handled,
        ms,
        roundTrips,
      },
      { before, after },
    );
  } finally {
    await boss.stop({ graceful: true, close: true, timeout: 5_000 });
  }
}

export async function pgBossLatency(p: LatencyParams & { localConcurrency?: number; concurrency?: number }): Promise<LatencyResult> {
  const localConcurrency = p.localConcurrency ?? 1;
  const batchSize = Math.floor((p.concurrency ?? 100) / localConcurrency);
  const boss = await startBoss(p.url, Math.max(10, localConcurrency + 4));
  const latencies: number[] = [];
  try {
    await boss.work<{ t: number }>(QUEUE, { batchSize, localConcurrency, burstWhenBatchFull: true, pollingIntervalSeconds: 0.5 }, async (jobs) => {
      const now = performance.now();
      for (const job of jobs) latencies.push(now - job.data.t);
    });
    await enqueueSteadily(p.rate, p.samples, (_, t) => boss.send(QUEUE, { t }));
    await waitFor(() => latencies.length >= p.samples, 'every pg-boss job to start');
    return latencyResult('pg-boss', `localConcurrency ${localConcurrency} × batchSize ${batchSize}, LISTEN/NOTIFY`, latencies);
  } finally {
    await boss.stop({ graceful: true, close: true, timeout: 5_000 });
  }
}
