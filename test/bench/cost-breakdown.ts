/**
 * Where a job's PostgreSQL CPU goes (issue 23): the same claim-and-complete loop, one connection,
 * batches of 100, on tables and statements that differ by one thing at a time, from a minimal
 * queue up to skiplock's own statement on skiplock's own table. CPU is the backend's own (from
 * /proc, this connection only: no autovacuum or WAL writer), per 1,000 jobs; interleaved rounds,
 * medians. What it answers: how much of skiplock's cost per job is its statement, its table's
 * CHECKs, its indexes, keeping the finished row at all — and so what each design change could gain.
 *
 *   node --experimental-strip-types test/bench/cost-breakdown.ts      BENCH_ROUNDS (5), BENCH_JOBS (20,000)
 */
import { readFileSync } from 'node:fs';
import pg from 'pg';
import { completeAndClaim, type ResultRow } from '../../src/store/jobs.ts';
import { startBenchServer } from './server.ts';

const ROUNDS = Number(process.env.BENCH_ROUNDS) || 5;
const JOBS = Number(process.env.BENCH_JOBS) || 20_000;
const BATCH = 100;

/** A queue with nothing but what claiming needs: one partial index. */
const MINIMAL = `CREATE TABLE q (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, task text NOT NULL, payload jsonb NOT NULL DEFAULT '{}',
  status text NOT NULL DEFAULT 'QUEUED', priority smallint NOT NULL DEFAULT 0, run_at timestamptz NOT NULL DEFAULT now(),
  attempts int NOT NULL DEFAULT 0, max_attempts int NOT NULL DEFAULT 5, timeout_ms int NOT NULL DEFAULT 10000,
  locked_by text, locked_until timestamptz, result jsonb, finished_at timestamptz, created_at timestamptz NOT NULL DEFAULT now());
  CREATE INDEX q_claim ON q (priority DESC, run_at, id) WHERE status = 'QUEUED'`;
/** skiplock.job's columns, and then its CHECKs, and then its indexes too. */
const WIDE = (including: string) => `CREATE TABLE q (LIKE skiplock.job ${including});
  ${including.includes('ALL') ? '' : `ALTER TABLE q ADD PRIMARY KEY (id); CREATE INDEX q_claim ON q (priority DESC, run_at, id) WHERE status = 'QUEUED';`}`;

const DONE = `UPDATE q j SET status = 'DONE', locked_by = NULL, locked_until = NULL, finished_at = now(), result = NULL
  FROM r WHERE j.id = r.id AND j.locked_by = $2 AND j.status = 'RUNNING'`;
const DELETE = `DELETE FROM q j USING r WHERE j.id = r.id AND j.locked_by = $2 AND j.status = 'RUNNING'`;
/** Write the last batch's results and claim the next batch, one statement: the shape of skiplock's, nothing else. */
const bare = (complete: string) => `WITH r AS MATERIALIZED (SELECT unnest($1::bigint[]) AS id), done AS (${complete} RETURNING j.id),
  next AS MATERIALIZED (SELECT id FROM q WHERE status = 'QUEUED' AND run_at <= now() ORDER BY priority DESC, run_at, id LIMIT ${BATCH} FOR UPDATE SKIP LOCKED)
  UPDATE q j SET status = 'RUNNING', attempts = j.attempts + 1, locked_by = $2, locked_until = now() + interval '30 seconds'
   WHERE j.id = ANY (ARRAY(SELECT id FROM next)) RETURNING j.id, j.task, j.payload, j.attempts`;

interface Variant { name: string; table: string | null; statement: 'bare-done' | 'bare-delete' | 'skiplock' }
const VARIANTS: Variant[] = [
  { name: 'minimal table, DONE by UPDATE', table: MINIMAL, statement: 'bare-done' },
  { name: 'minimal table, DELETE when done', table: MINIMAL, statement: 'bare-delete' },
  { name: "skiplock.job's columns, 2 indexes", table: WIDE('INCLUDING DEFAULTS INCLUDING IDENTITY'), statement: 'bare-done' },
  { name: '+ its CHECKs', table: WIDE('INCLUDING DEFAULTS INCLUDING IDENTITY INCLUDING CONSTRAINTS'), statement: 'bare-done' },
  { name: '+ its 14 indexes (= skiplock.job)', table: WIDE('INCLUDING ALL'), statement: 'bare-done' },
  { name: "skiplock's statement on skiplock.job", table: null, statement: 'skiplock' },
];

const cpuMs = (pid: number) => {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = f.slice(f.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10;
};

async function run(url: string, v: Variant): Promise<{ jobsPerSec: number; cpuMsPerKJob: number }> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    const table = v.table ? 'q' : 'skiplock.job';
    if (v.table) await c.query(v.table);
    await c.query(`INSERT INTO ${table} (task, payload) SELECT 'noop', '{}'::jsonb FROM generate_series(1, ${JOBS})`);
    await c.query(`VACUUM ANALYZE ${table}`);
    const pid = (await c.query('SELECT pg_backend_pid() AS pid')).rows[0].pid as number;
    const cpu0 = cpuMs(pid);
    const t0 = performance.now();
    let ids: string[] = [];
    let handled = 0;
    for (;;) {
      if (v.statement === 'skiplock') {
        const results: ResultRow[] = ids.map((id) => ({ id, attempt: 1, status: 'DONE', result: null, error: null, delay_ms: 0, release: false }));
        const s = completeAndClaim({ now: null, workerId: 'w', results, limit: BATCH, budgetMs: 3_600_000, leaseMs: 30_000, leaseGraceMs: 5_000, tasks: ['noop'] });
        const { rows } = await c.query({ name: 'claim', text: s.text, values: [...s.values] });
        ids = rows.filter((row) => row.id !== null).map((row) => String(row.id));
      } else {
        const text = bare(v.statement === 'bare-delete' ? DELETE : DONE);
        ids = (await c.query({ name: 'claim', text, values: [ids, 'w'] })).rows.map((row) => String(row.id));
      }
      handled += ids.length;
      if (ids.length === 0) break;
    }
    const ms = performance.now() - t0;
    if (handled !== JOBS) throw new Error(`${v.name}: ${handled} of ${JOBS} jobs`);
    return { jobsPerSec: Math.round((handled / ms) * 1000), cpuMsPerKJob: ((cpuMs(pid) - cpu0) / handled) * 1000 };
  } finally {
    await c.end();
  }
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const server = await startBenchServer();
try {
  const results = new Map<string, { jobsPerSec: number; cpuMsPerKJob: number }[]>();
  let n = 0;
  for (let round = 1; round <= ROUNDS; round++) {
    const order = round % 2 ? VARIANTS : [...VARIANTS].reverse();
    for (const v of order) {
      const r = await run(await server.createDatabase(`breakdown_${++n}`, 'skiplock'), v);
      (results.get(v.name) ?? results.set(v.name, []).get(v.name)!).push(r);
      process.stderr.write(`[breakdown] round ${round} ${v.name}: ${r.jobsPerSec} jobs/s, ${r.cpuMsPerKJob.toFixed(1)} ms/1k\n`);
    }
  }
  const lines = [
    `Cost breakdown, ${JOBS.toLocaleString('en')} no-op jobs, batches of ${BATCH}, one connection, ${ROUNDS} rounds interleaved; medians`,
    '',
    '| table and statement | jobs/s | backend CPU ms / 1,000 jobs |',
    '| --- | ---: | ---: |',
    ...VARIANTS.map((v) => {
      const rs = results.get(v.name)!;
      return `| ${v.name} | ${median(rs.map((r) => r.jobsPerSec)).toLocaleString('en')} | ${median(rs.map((r) => r.cpuMsPerKJob)).toFixed(1)} |`;
    }),
  ];
  process.stdout.write(`${lines.join('\n')}\n`);
} finally {
  await server.stop();
}
