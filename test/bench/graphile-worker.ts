/**
 * graphile-worker 0.18, tuned as its performance page describes: `concurrentJobs` handlers,
 * a local queue (jobs fetched and locked in batches, then handed out in memory), and batched
 * completion (`completeJobBatchDelay` / `failJobBatchDelay` 0: results finishing together are
 * written together). New jobs wake it by LISTEN/NOTIFY. Concurrency = concurrentJobs.
 */
import { Logger, makeWorkerUtils, run, runMigrations, type Runner } from 'graphile-worker';
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

export interface GraphileThroughputParams extends ThroughputParams {
  /** Jobs fetched (and locked) per local-queue fetch. Default 500, as on graphile-worker's performance page. */
  localQueueSize?: number;
}

const quiet = new Logger(() => (level, message) => {
  if (level === 'error') console.error('[graphile-worker]', message);
});

function preset(p: { concurrency: number; localQueueSize: number }) {
  return {
    worker: {
      concurrentJobs: p.concurrency,
      maxPoolSize: p.concurrency + 2,
      localQueue: { size: p.localQueueSize },
      completeJobBatchDelay: 0,
      failJobBatchDelay: 0,
    },
  };
}

async function startRunner(url: string, concurrency: number, localQueueSize: number, taskList: Record<string, (payload: unknown) => Promise<void> | void>): Promise<Runner> {
  return run({
    connectionString: url,
    concurrency,
    noHandleSignals: true,
    logger: quiet,
    taskList: taskList as never,
    preset: preset({ concurrency, localQueueSize }),
  });
}

export async function graphileThroughput(p: GraphileThroughputParams): Promise<ThroughputResult> {
  const localQueueSize = p.localQueueSize ?? 500;
  const database = databaseOf(p.url);
  const counter = countPgQueries();
  await runMigrations({ connectionString: p.url, logger: quiet });
  const utils = await makeWorkerUtils({ connectionString: p.url, logger: quiet });
  try {
    for (let from = 0; from < p.jobs; from += 5_000) {
      await utils.addJobs(Array.from({ length: Math.min(5_000, p.jobs - from) }, () => ({ identifier: 'noop', payload: {} })));
    }
  } finally {
    await utils.release();
  }
  const checker = await openChecker(p.url);
  if (p.tableStats !== 'fresh') await analyzeDatabase(p.url);
  const before = await readServerCounters(p.adminUrl, database, p.postmasterPid);
  counter.reset(database);
  let handled = 0;
  let firstStart = 0;
  const runner = await startRunner(p.url, p.concurrency, localQueueSize, {
    noop: () => {
      if (handled++ === 0) firstStart = performance.now();
    },
  });
  try {
    await waitFor(() => handled >= p.jobs, 'every graphile-worker job to run');
    // A completed job is deleted from the jobs table.
    const leftSql = `SELECT count(*) AS n FROM graphile_worker._private_jobs`;
    await waitFor(async () => (await checker.count(leftSql)) === 0, 'graphile-worker to record every completion', 60_000, 5);
    const ms = performance.now() - firstStart;
    const roundTrips = counter.read(database);
    const after = await readServerCounters(p.adminUrl, database, p.postmasterPid);
    return finishResult(
      {
        system: 'graphile-worker',
        config: `concurrentJobs ${p.concurrency}, localQueue.size ${localQueueSize}, completeJobBatchDelay 0, failJobBatchDelay 0`,
        jobs: p.jobs,
        completed: p.jobs - (await checker.count(leftSql)),
        handled,
        ms,
        roundTrips,
      },
      { before, after },
    );
  } finally {
    await checker.close();
    await runner.stop();
  }
}

export async function graphileLatency(p: LatencyParams & { concurrency?: number; localQueueSize?: number }): Promise<LatencyResult> {
  const concurrency = p.concurrency ?? 100;
  const localQueueSize = p.localQueueSize ?? 500;
  await runMigrations({ connectionString: p.url, logger: quiet });
  const latencies: number[] = [];
  const runner = await startRunner(p.url, concurrency, localQueueSize, {
    stamp: (payload) => void latencies.push(performance.now() - (payload as { t: number }).t),
  });
  try {
    await enqueueSteadily(p.rate, p.samples, (_, t) => runner.addJob('stamp', { t }));
    await waitFor(() => latencies.length >= p.samples, 'every graphile-worker job to start');
    return latencyResult('graphile-worker', `concurrentJobs ${concurrency}, localQueue.size ${localQueueSize}, LISTEN/NOTIFY`, latencies);
  } finally {
    await runner.stop();
  }
}
