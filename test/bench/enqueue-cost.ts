/**
 * The other half of a job's life (issue 23): what an enqueue costs. skiplock's enqueue and
 * enqueueBatch, graphile-worker's addJob and addJobs, pg-boss's send and insert, one job per call
 * (what a route does) and 100 per call, on one connection each. jobs/s, the worker's CPU
 * (process.cpuUsage) and PostgreSQL's (every server process, /proc) per 1,000 jobs; each system
 * in a database of its own, interleaved over the rounds, medians.
 *
 *   node --experimental-strip-types test/bench/enqueue-cost.ts      BENCH_ROUNDS (3)
 */
import { makeWorkerUtils, runMigrations, Logger } from 'graphile-worker';
import { PgBoss } from 'pg-boss';
import * as z from 'zod';
import { createSkiplock, defineTask } from '../../src/index.ts';
import { createPgDriver } from '../../src/store/drivers/pg.ts';
import { postgresCpuMs } from './cpu.ts';
import { startBenchServer } from './server.ts';

const ROUNDS = Number(process.env.BENCH_ROUNDS) || 3;
/** Jobs per measurement: fewer one at a time, where each is a round trip. */
const JOBS = { 1: 2_000, 100: 20_000 } as const;
type Size = keyof typeof JOBS;

/** Opens a system on a fresh database and returns how it enqueues `n` jobs, `size` per call. */
type Open = (url: string) => Promise<{ enqueue(size: Size, from: number): Promise<void>; close(): Promise<void> }>;

const quiet = new Logger(() => () => {});
const payload = (i: number) => ({ n: i });

const SYSTEMS: Record<string, Open> = {
  skiplock: async (url) => {
    const sql = createPgDriver(url, { max: 1 });
    const noop = defineTask({ name: 'noop', payload: z.object({ n: z.number() }), handler: () => {} });
    const skiplock = createSkiplock({ sql, tasks: [noop], log: () => {} });
    return {
      enqueue: async (size, from) => {
        if (size === 1) await skiplock.enqueue({ task: 'noop', payload: payload(from) });
        else await skiplock.enqueueBatch(Array.from({ length: size }, (_, k) => ({ task: 'noop', payload: payload(from + k) })));
      },
      close: () => sql.close(),
    };
  },
  'graphile-worker': async (url) => {
    await runMigrations({ connectionString: url, logger: quiet });
    const utils = await makeWorkerUtils({ connectionString: url, logger: quiet });
    return {
      enqueue: async (size, from) => {
        if (size === 1) await utils.addJob('noop', payload(from));
        else await utils.addJobs(Array.from({ length: size }, (_, k) => ({ identifier: 'noop', payload: payload(from + k) })));
      },
      close: async () => void (await utils.release()),
    };
  },
  'pg-boss': async (url) => {
    const boss = new PgBoss({ connectionString: url, max: 1, supervise: false, schedule: false });
    boss.on('error', (error: unknown) => console.error('[pg-boss]', error));
    await boss.start();
    await boss.createQueue('noop');
    return {
      enqueue: async (size, from) => {
        if (size === 1) await boss.send('noop', payload(from));
        else await boss.insert('noop', Array.from({ length: size }, (_, k) => ({ data: payload(from + k) })));
      },
      close: () => boss.stop({ graceful: false }),
    };
  },
};

const server = await startBenchServer();
const results = new Map<string, { jps: number[]; worker: number[]; pg: number[] }>();
let n = 0;
try {
  for (let round = 0; round < ROUNDS; round++) {
    const names = round % 2 ? Object.keys(SYSTEMS).reverse() : Object.keys(SYSTEMS);
    for (const name of names) {
      const system = await SYSTEMS[name]!(await server.createDatabase(`enqueue_${++n}`, name === 'skiplock' ? 'skiplock' : 'empty'));
      try {
        await system.enqueue(1, -1); // connection, prepared statements, first plans: not measured
        for (const size of [1, 100] as const) {
          const jobs = JOBS[size];
          const cpu0 = process.cpuUsage();
          const pg0 = postgresCpuMs(server.postmasterPid);
          const t0 = performance.now();
          for (let from = 0; from < jobs; from += size) await system.enqueue(size, from);
          const ms = performance.now() - t0;
          const cpu = process.cpuUsage(cpu0);
          const key = `${name}|${size}`;
          const r = results.get(key) ?? results.set(key, { jps: [], worker: [], pg: [] }).get(key)!;
          r.jps.push((jobs / ms) * 1000);
          r.worker.push(((cpu.user + cpu.system) / 1000 / jobs) * 1000);
          r.pg.push(((postgresCpuMs(server.postmasterPid) - pg0) / jobs) * 1000);
          process.stderr.write(`[enqueue] round ${round + 1} ${name} × ${size}: ${Math.round(r.jps.at(-1)!)} jobs/s\n`);
        }
      } finally {
        await system.close();
      }
    }
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  const lines = [
    `Enqueue cost, one connection, ${ROUNDS} rounds interleaved; medians`,
    '',
    '| system | jobs per call | jobs/s | worker CPU ms / 1,000 jobs | PostgreSQL CPU ms / 1,000 jobs |',
    '| --- | ---: | ---: | ---: | ---: |',
  ];
  for (const size of [1, 100] as const) {
    for (const name of Object.keys(SYSTEMS)) {
      const r = results.get(`${name}|${size}`)!;
      lines.push(`| ${name} | ${size} | ${Math.round(median(r.jps)).toLocaleString('en')} | ${median(r.worker).toFixed(1)} | ${median(r.pg).toFixed(1)} |`);
    }
  }
  process.stdout.write(`${lines.join('\n')}\n`);
} finally {
  await server.stop();
}
