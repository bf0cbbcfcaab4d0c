/**
 * What the tick's statement costs per call, by batch size (issue 33: "the statement's fixed cost at
 * small batches ... measure it per claim at 5, 25, 100"), sent three ways: prepared (as the pg
 * driver sends it), unprepared (as Neon's HTTP endpoint receives every statement: parsed and
 * planned each time), and as its stored form where the tree has one (a call of the function that
 * holds it: src/store/stored-tick.ts). For each tree given (this one by default; another
 * checkout, e.g. `git worktree add ../base <commit>`, to compare), on a fresh database migrated by
 * that tree, one connection, nothing else running on it: the steady-state statement of one tick
 * (write the previous batch's DONE results, claim the next batch) sent 300 times; unprepared, also
 * its planning alone (EXPLAIN, no ANALYZE) 400 times. Prints per call: PostgreSQL's planning and
 * execution (pg_stat_statements), its CPU (every server process), the client's wait; and per
 * 1,000 jobs. Trees alternate, every measurement twice, on one server.
 *
 *   node --experimental-strip-types test/bench/statement-cost.ts [tree ...]     STATEMENT_SIZES (5,25,100)
 */
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import pg from 'pg';
import { postgresCpuMs } from './cpu.ts';
import { startBenchServer, type BenchServer } from './server.ts';

const trees = process.argv.slice(2).map((t) => resolve(t));
if (trees.length === 0) trees.push(resolve(import.meta.dirname, '../..'));
const STATEMENTS = 300;
const PLANS = 400;
const SIZES = (process.env.STATEMENT_SIZES ?? '5,25,100').split(',').map(Number);
/** Enough for every claim of the largest size. */
const seededFor = (size: number) => size * (STATEMENTS + 10);

interface ResultRow { id: string; attempt: number; status: 'DONE'; result: null; error: null; delay_ms: 0; release: false; locked_by: string }
interface TreeCode {
  completeAndClaim(p: object): { text: string; values: readonly unknown[]; stored?: { text: string; values: readonly unknown[] } };
  migrate(url: string): Promise<void>;
  seed(client: pg.Client, jobs: number): Promise<void>;
}

async function codeOf(tree: string): Promise<TreeCode> {
  const load = (path: string) => import(pathToFileURL(resolve(tree, path)).href);
  const [{ completeAndClaim }, { migrate }, { loadMigrations }, { createPgDriver }] = await Promise.all(
    ['src/store/claim.ts', 'src/store/migrate.ts', 'src/store/migrations-fs.ts', 'src/store/drivers/pg.ts'].map(load),
  );
  return {
    completeAndClaim,
    async migrate(url) {
      const sql = createPgDriver(url, { max: 1 });
      try {
        await migrate(sql, await loadMigrations(resolve(tree, 'migrations') + '/'));
      } finally {
        await sql.close();
      }
    },
    async seed(client, jobs) {
      const split = (await client.query(`SELECT to_regclass('skiplock.queue') IS NOT NULL AS q`)).rows[0].q as boolean;
      const insert = `INSERT INTO skiplock.${split ? 'job_record' : 'job'} (task, payload) SELECT 'noop', '{}' FROM generate_series(1, ${jobs})`;
      // The one-table model (before migration 021) has no queue and no seed helper.
      if (split) await client.query((await load('test/support/seed.ts')).seeded(insert));
      else await client.query(insert);
    },
  };
}

/** The tick's parameters, but its results and claim size. */
const PLAIN = { now: null, workerId: 'w1', results: [], budgetMs: 25_000, tasks: ['noop'], leaseMs: 30_000, leaseGraceMs: 5_000, staticSchedules: null, probeLeases: false };

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

type Mode = 'prepared' | 'unprepared' | 'stored';

async function measure(server: BenchServer, url: string, code: TreeCode, size: number, mode: Mode) {
  await code.migrate(url);
  const client = new pg.Client({ connectionString: url });
  client.on('error', () => {});
  await client.connect();
  try {
    await code.seed(client, seededFor(size));
    await client.query('VACUUM ANALYZE');
    await client.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
    await client.query('SELECT pg_stat_statements_reset()');
    let results: ResultRow[] = [];
    const plans: number[] = [];
    let sending = 0;
    let serverCpu = 0;
    for (let i = 0; i < STATEMENTS; i++) {
      const st = code.completeAndClaim({ ...PLAIN, results, limit: size });
      if (i === STATEMENTS / 2 && mode === 'unprepared') {
        for (let k = 0; k < PLANS; k++) {
          const explained = await client.query(`EXPLAIN (SUMMARY) ${st.text}`, st.values as unknown[]);
          const line = explained.rows.map((r) => String(r['QUERY PLAN'])).find((l) => l.startsWith('Planning Time'))!;
          plans.push(Number(/([\d.]+) ms/.exec(line)![1]));
        }
      }
      const started = performance.now();
      const cpu = postgresCpuMs(server.postmasterPid);
      const sent = mode === 'stored' ? (st.stored ?? st) : st;
      const answer = await client.query({ ...(mode === 'prepared' ? { name: 'tick' } : {}), text: sent.text, values: sent.values as unknown[] });
      serverCpu += postgresCpuMs(server.postmasterPid) - cpu;
      sending += performance.now() - started;
      const rows = answer.rows.filter((r) => r.id !== null && r.id !== undefined);
      results = rows.map((r) => ({ id: String(r.id), attempt: Number(r.attempts), status: 'DONE', result: null, error: null, delay_ms: 0, release: false, locked_by: 'w1' }));
    }
    const [s] = (await client.query(`SELECT calls, total_plan_time AS plan, total_exec_time AS exec FROM pg_stat_statements
                                      WHERE (query LIKE 'WITH%' OR query LIKE 'SELECT * FROM skiplock.tick%') AND calls >= ${STATEMENTS / 2}
                                      ORDER BY calls DESC LIMIT 1`)).rows;
    return {
      planP50: plans.length ? median(plans) : NaN, planMin: Math.min(...plans),
      planPerCall: s.plan / s.calls, execPerCall: s.exec / s.calls,
      clientMsPerStatement: sending / STATEMENTS,
      serverCpuPerCall: serverCpu / STATEMENTS,
    };
  } finally {
    await client.end();
  }
}

const server = await startBenchServer();
try {
  const codes = await Promise.all(trees.map(codeOf));
  const f = (x: number) => x.toFixed(3);
  console.log('| tree | jobs per claim | sent | planning + execution ms / call | PostgreSQL CPU ms / call | client ms / call | PostgreSQL CPU ms / 1,000 jobs | planning alone p50 (min) |');
  console.log('| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: |');
  let n = 0;
  for (let round = 1; round <= 2; round++) {
    for (const size of SIZES) {
      for (const mode of ['prepared', 'unprepared', 'stored'] as const) {
        for (const [i, tree] of trees.entries()) {
          if (mode === 'stored' && !codes[i]!.completeAndClaim({ ...PLAIN, limit: size }).stored) {
            console.log(`| ${tree} (round ${round}) | ${size} | stored | no stored form in this tree | | | | |`);
            continue;
          }
          const r = await measure(server, await server.createDatabase(`statement_cost_${n++}`, 'empty'), codes[i]!, size, mode);
          console.log(`| ${tree} (round ${round}) | ${size} | ${mode} | ${f(r.planPerCall)} + ${f(r.execPerCall)} | ${f(r.serverCpuPerCall)} | ` +
            `${f(r.clientMsPerStatement)} | ${(r.serverCpuPerCall / size * 1000).toFixed(0)} | ${mode === 'unprepared' ? `${f(r.planP50)} (${f(r.planMin)})` : '–'} |`);
        }
      }
    }
  }
} finally {
  await server.stop();
}
