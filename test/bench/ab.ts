/**
 * A/B: this tree against another checkout of skiplock (e.g. `git worktree add ../base <commit>`
 * and `npm ci` there), on one embedded PostgreSQL, interleaved (A, B, B, A, …: each round swaps
 * which goes first), so that the machine's load weighs on both alike. Each side runs its own
 * bench code (its test/bench/child.ts) against a database copied from a template migrated with
 * its own migrations.
 *
 *   node --experimental-strip-types test/bench/ab.ts /path/to/base [scenario,...]
 *     BENCH_ROUNDS (default 5), BENCH_JOBS (default 20,000)
 *     scenarios: raw (completeAndClaim loop, batch 100, one connection), tick (one tick × 100),
 *                tick4 (4 ticks × 100), tick48 (48 ticks × 25: many small invocations at once)
 *     AB_VARIANTS=name:ENV=1,name2:ENV=2: more sides, this tree with these environment variables
 *     AB_TREES=name:/path/to/tree,...: more sides, other trees (each with its own migrations)
 *
 * Prints, per side and scenario: jobs/s, CPU ms per 1,000 jobs (worker + PostgreSQL), statement
 * ms per 1,000 jobs, and the claim statement's mean time per call (pg_stat_statements), medians,
 * with the load average at each run. "Paired": the median over rounds of each round's ratio to the
 * base's run of the same round, which the machine's load, varying from round to round, sways less.
 */
import { loadavg } from 'node:os';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { runInChild } from './child.ts';
import { BENCH_MARK, claimStatementStats, databaseOf, readStatementStats, uncountedClient, type ThroughputResult } from './harness.ts';
import { startBenchServer } from './server.ts';

const [baseDir, scenarioArg] = process.argv.slice(2);
if (!baseDir) throw new Error('usage: ab.ts /path/to/base/tree [raw,tick]');
const ROUNDS = Number(process.env.BENCH_ROUNDS) || 5;
const JOBS = Number(process.env.BENCH_JOBS) || 20_000;
const SCENARIOS = (scenarioArg ?? 'raw,tick').split(',');

/** The tick scenarios: one tick × 100, 4 ticks × 100, 48 ticks × 25 (the serverless shape, issue 17's curve). */
const TICK_SHAPES: Record<string, { ticks: number; perTick?: number }> = { tick: { ticks: 1 }, tick4: { ticks: 4, perTick: 100 }, tick48: { ticks: 48, perTick: 25 } };
const unknownScenario = (name: string): never => {
  throw new Error(`unknown scenario ${name}: raw, ${Object.keys(TICK_SHAPES).join(', ')}`);
};

interface Side { name: string; childFile: string; template: string; env?: Record<string, string>; tree?: string }
const here = resolve(import.meta.dirname, '../..');
const sides: Side[] = [
  { name: 'base', childFile: resolve(baseDir, 'test/bench/child.ts'), template: 'ab_base_template' },
  { name: 'head', childFile: resolve(here, 'test/bench/child.ts'), template: 'ab_head_template' },
  ...(process.env.AB_VARIANTS ?? '').split(',').filter(Boolean).map((v) => {
    const [name, ...assignments] = v.split(':');
    const env = Object.fromEntries(assignments.map((a) => a.split('=') as [string, string]));
    return { name: name!, childFile: resolve(here, 'test/bench/child.ts'), template: 'ab_head_template', env };
  }),
  ...(process.env.AB_TREES ?? '').split(',').filter(Boolean).map((t) => {
    const [name, dir] = t.split(':') as [string, string];
    return { name, childFile: resolve(dir, 'test/bench/child.ts'), template: `ab_${name}_template`, tree: resolve(dir) };
  }),
];

async function migrator(tree: string) {
  const { migrate } = (await import(pathToFileURL(resolve(tree, 'src/store/migrate.ts')).href)) as typeof import('../../src/store/migrate.ts');
  const { loadMigrations } = (await import(pathToFileURL(resolve(tree, 'src/store/migrations-fs.ts')).href)) as typeof import('../../src/store/migrations-fs.ts');
  const { createPgDriver } = (await import(pathToFileURL(resolve(tree, 'src/store/drivers/pg.ts')).href)) as typeof import('../../src/store/drivers/pg.ts');
  return async (url: string) => {
    const sql = createPgDriver(url, { max: 1 });
    try {
      await migrate(sql, await loadMigrations(resolve(tree, 'migrations') + '/'));
    } finally {
      await sql.close();
    }
  };
}

interface Row { side: string; scenario: string; round: number; load: number; r: ThroughputResult; claimMeanMs: number; claimCalls: number; walPerJob: number; hitPerJob: number; dirtiedPerJob: number; hotShare: number }

/** The share of the record's updates that were HOT (skiplock.job_record, or skiplock.job before migration 021), once the run's backends have gone (and flushed their counts). */
async function recordHotShare(url: string): Promise<number> {
  const client = await uncountedClient(url);
  try {
    const q = async (text: string) => (await client.query(`${BENCH_MARK} ${text}`)).rows[0] as Record<string, number>;
    for (let i = 0; i < 100 && (await q('SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()')).n! > 0; i++) await new Promise((r) => setTimeout(r, 50));
    const { upd, hot } = await q(`SELECT n_tup_upd::float8 AS upd, n_tup_hot_upd::float8 AS hot FROM pg_stat_user_tables WHERE relid = coalesce(to_regclass('skiplock.job_record'), 'skiplock.job'::regclass)`);
    if (process.env.AB_DEBUG) log(`record: ${upd} updates, ${hot} HOT`);
    return upd ? hot! / upd : NaN;
  } finally {
    await client.end();
  }
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};
const log = (m: string) => process.stderr.write(`[ab ${new Date().toISOString().slice(11, 19)}] ${m}\n`);

const server = await startBenchServer({ durable: process.env.BENCH_FSYNC === 'on' });
try {
  await server.createTemplate('ab_base_template', await migrator(resolve(baseDir)));
  await server.createTemplate('ab_head_template', await migrator(here));
  for (const side of sides) if (side.tree) await server.createTemplate(side.template, await migrator(side.tree));
  const rows: Row[] = [];
  let n = 0;
  for (let round = 1; round <= ROUNDS; round++) {
    for (const scenario of SCENARIOS) {
      const order = round % 2 ? sides : [...sides].reverse();
      for (const side of order) {
        const url = await server.createDatabase(`ab_${++n}`, { template: side.template });
        const params = { url, adminUrl: server.adminUrl, postmasterPid: server.postmasterPid, jobs: JOBS, concurrency: 100 };
        const load = loadavg()[0]!;
        const r = scenario === 'raw'
          ? await runInChild('rawSqlThroughput', params, side.childFile, side.env)
          : await runInChild('skiplockThroughput', { ...params, ...TICK_SHAPES[scenario] ?? unknownScenario(scenario) }, side.childFile, side.env);
        const stats = await readStatementStats(server.adminUrl, databaseOf(url));
        const { claims: claim, calls, meanMs } = claimStatementStats(stats);
        const claimMeanMs = meanMs ?? 0;
        const sum = (f: (x: (typeof claim)[number]) => number) => claim.reduce((a, x) => a + f(x), 0) / JOBS;
        const hotShare = await recordHotShare(url);
        rows.push({ side: side.name, scenario, round, load, r, claimMeanMs, claimCalls: calls, walPerJob: sum((x) => x.walBytes), hitPerJob: sum((x) => x.sharedBlksHit), dirtiedPerJob: sum((x) => x.sharedBlksDirtied), hotShare });
        log(`round ${round} ${scenario} ${side.name}: ${r.jobsPerSec} jobs/s, CPU ${r.clientCpuMsPerKJob} + ${r.serverCpuMsPerKJob} ms/1k, statements ${r.serverStatementMsPerKJob} ms/1k, claim ${claimMeanMs.toFixed(3)} ms × ${calls}, record updates HOT ${(100 * hotShare).toFixed(0)}% (load ${load.toFixed(2)})`);
      }
    }
  }
  const out: string[] = [
    `A/B, ${JOBS.toLocaleString('en')} no-op jobs, ${ROUNDS} rounds interleaved, fsync ${server.durable ? 'on' : 'off'}; medians`,
    '',
    '| scenario | side | jobs/s | vs base | paired | worker + PostgreSQL CPU ms / 1,000 jobs | vs base | PostgreSQL CPU, paired | statement ms / 1,000 jobs | claim statement ms / call | claim WAL bytes / job | buffers hit / job | dirtied / job | record updates HOT | load average (min–max) |',
    '| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |',
  ];
  for (const scenario of SCENARIOS) {
    const base = rows.filter((x) => x.side === 'base' && x.scenario === scenario);
    const baseJps = median(base.map((x) => x.r.jobsPerSec));
    const baseCpu = median(base.map((x) => (x.r.clientCpuMsPerKJob ?? 0) + (x.r.serverCpuMsPerKJob ?? 0)));
    for (const side of sides) {
      const mine = rows.filter((x) => x.side === side.name && x.scenario === scenario);
      const jps = median(mine.map((x) => x.r.jobsPerSec));
      const cpuW = median(mine.map((x) => x.r.clientCpuMsPerKJob ?? 0));
      const cpuS = median(mine.map((x) => x.r.serverCpuMsPerKJob ?? 0));
      const cpu = median(mine.map((x) => (x.r.clientCpuMsPerKJob ?? 0) + (x.r.serverCpuMsPerKJob ?? 0)));
      const stmt = median(mine.map((x) => x.r.serverStatementMsPerKJob ?? 0));
      const claim = median(mine.map((x) => x.claimMeanMs));
      const loads = mine.map((x) => x.load);
      const wal = median(mine.map((x) => x.walPerJob));
      const hit = median(mine.map((x) => x.hitPerJob));
      const dirtied = median(mine.map((x) => x.dirtiedPerJob));
      const hot = median(mine.map((x) => x.hotShare));
      const paired = (f: (x: Row) => number) => {
        const ratios = mine.flatMap((x) => base.filter((b) => b.round === x.round).map((b) => f(x) / f(b)));
        return `${(100 * median(ratios)).toFixed(1)}%`;
      };
      out.push(
        `| ${scenario} | ${side.name} | ${Math.round(jps).toLocaleString('en')} | ${((100 * jps) / baseJps).toFixed(1)}% | ${paired((x) => x.r.jobsPerSec)} | ${cpuW.toFixed(1)} + ${cpuS.toFixed(1)} = ${cpu.toFixed(1)} | ${((100 * cpu) / baseCpu).toFixed(1)}% | ${paired((x) => x.r.serverCpuMsPerKJob ?? 0)} | ${stmt.toFixed(1)} | ${claim.toFixed(3)} | ${Math.round(wal)} | ${hit.toFixed(1)} | ${dirtied.toFixed(2)} | ${(100 * hot).toFixed(0)}% | ${Math.min(...loads).toFixed(2)}–${Math.max(...loads).toFixed(2)} |`,
      );
    }
  }
  process.stdout.write(`${out.join('\n')}\n`);
  process.stdout.write(`\n${JSON.stringify(rows.map((x) => ({ side: x.side, scenario: x.scenario, load: x.load, jps: x.r.jobsPerSec, cpuW: x.r.clientCpuMsPerKJob, cpuS: x.r.serverCpuMsPerKJob, stmt: x.r.serverStatementMsPerKJob, claimMs: x.claimMeanMs })))}\n`);
} finally {
  await server.stop();
}
