/**
 * What the tick's statement costs a driver that cannot prepare it (issue 33: Neon's HTTP driver,
 * where PostgreSQL parses and plans every statement it is sent). For each tree given (this one by
 * default; another checkout's, e.g. `git worktree add ../base <commit>`, to compare), on a fresh
 * database migrated by that tree: the steady-state statement of one tick at concurrency 5 (write
 * the previous 5 DONE results, claim 5), sent unprepared 300 times as node-postgres sends it;
 * then its planning alone (EXPLAIN, no ANALYZE) 400 times. Prints planning time p50 / min,
 * planning and execution per call (pg_stat_statements), and the client's time per statement.
 * Trees are run one after another, each twice (A B A B), on one server.
 *
 *   node --experimental-strip-types test/bench/statement-planning.ts [tree ...]
 */
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import pg from 'pg';
import { startBenchServer } from './server.ts';

const trees = process.argv.slice(2).map((t) => resolve(t));
if (trees.length === 0) trees.push(resolve(import.meta.dirname, '../..'));
const STATEMENTS = 300;
const PLANS = 400;
const SEEDED = 3_000;

interface ResultRow { id: string; attempt: number; status: 'DONE'; result: null; error: null; delay_ms: 0; release: false; locked_by: string }
interface TreeCode {
  completeAndClaim(p: object): { text: string; values: readonly unknown[] };
  migrate(url: string): Promise<void>;
  seed(client: pg.Client): Promise<void>;
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
    async seed(client) {
      const split = (await client.query(`SELECT to_regclass('skiplock.queue') IS NOT NULL AS q`)).rows[0].q as boolean;
      const insert = `INSERT INTO skiplock.${split ? 'job_record' : 'job'} (task, payload) SELECT 'noop', '{}' FROM generate_series(1, ${SEEDED})`;
      // The one-table model (before migration 021) has no queue and no seed helper.
      if (split) await client.query((await load('test/support/seed.ts')).seeded(insert));
      else await client.query(insert);
    },
  };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function measure(url: string, code: TreeCode) {
  await code.migrate(url);
  const client = new pg.Client({ connectionString: url });
  client.on('error', () => {});
  await client.connect();
  try {
    await code.seed(client);
    await client.query('VACUUM ANALYZE');
    await client.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
    await client.query('SELECT pg_stat_statements_reset()');
    let results: ResultRow[] = [];
    const plans: number[] = [];
    let sending = 0;
    for (let i = 0; i < STATEMENTS; i++) {
      const st = code.completeAndClaim({
        now: null, workerId: 'w1', results, limit: 5, budgetMs: 25_000, tasks: ['noop'], leaseMs: 30_000, leaseGraceMs: 5_000, staticSchedules: null, probeLeases: false,
      });
      if (i === STATEMENTS / 2) {
        for (let k = 0; k < PLANS; k++) {
          const explained = await client.query(`EXPLAIN (SUMMARY) ${st.text}`, st.values as unknown[]);
          const line = explained.rows.map((r) => String(r['QUERY PLAN'])).find((l) => l.startsWith('Planning Time'))!;
          plans.push(Number(/([\d.]+) ms/.exec(line)![1]));
        }
      }
      const sent = performance.now();
      const answer = await client.query(st.text, st.values as unknown[]);
      sending += performance.now() - sent;
      const rows = answer.rows.filter((r) => r.id !== null && r.id !== undefined);
      results = rows.map((r) => ({ id: String(r.id), attempt: Number(r.attempts), status: 'DONE', result: null, error: null, delay_ms: 0, release: false, locked_by: 'w1' }));
    }
    const [s] = (await client.query(`SELECT calls, total_plan_time AS plan, total_exec_time AS exec FROM pg_stat_statements
                                      WHERE query LIKE 'WITH%' AND calls >= ${STATEMENTS / 2} ORDER BY calls DESC LIMIT 1`)).rows;
    return {
      textChars: code.completeAndClaim({ now: null, workerId: 'w1', results, limit: 5, budgetMs: 1, tasks: ['noop'], leaseMs: 1, leaseGraceMs: 1 }).text.length,
      planP50: median(plans), planMin: Math.min(...plans),
      planPerCall: s.plan / s.calls, execPerCall: s.exec / s.calls,
      clientMsPerStatement: sending / STATEMENTS,
    };
  } finally {
    await client.end();
  }
}

const server = await startBenchServer();
try {
  const codes = await Promise.all(trees.map(codeOf));
  let n = 0;
  for (let round = 1; round <= 2; round++) {
    for (const [i, tree] of trees.entries()) {
      const r = await measure(await server.createDatabase(`plan_${n++}`, 'empty'), codes[i]!);
      const f = (x: number) => x.toFixed(3);
      console.log(`${tree} round ${round}: ${r.textChars} chars; planning p50 ${f(r.planP50)} ms (min ${f(r.planMin)}); ` +
        `per call planning ${f(r.planPerCall)} + execution ${f(r.execPerCall)} ms; client ${f(r.clientMsPerStatement)} ms per statement`);
    }
  }
} finally {
  await server.stop();
}
