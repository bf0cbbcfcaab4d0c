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
import pg from 'pg';
import { completeAndClaim, type ResultRow } from '../../src/store/claim.ts';
import { pidCpuMs } from './cpu.ts';
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

/**
 * The next design step, as a prototype (docs/measurements-log.md, "The next design step"): skiplock.job
 * keeps the record with no index on status, lease or finish time but a BRIN one (which PostgreSQL
 * 16+ does not count against HOT), so its UPDATEs can be HOT; a narrow queue table holds the live
 * state with the claim, reaper and status-listing indexes, and its row is deleted when done.
 */
const SPLIT = (fillfactor: number) => `CREATE TABLE q (LIKE skiplock.job INCLUDING DEFAULTS INCLUDING IDENTITY INCLUDING CONSTRAINTS) WITH (fillfactor = ${fillfactor});
  ALTER TABLE q ADD PRIMARY KEY (id);
  CREATE INDEX q_task_id ON q (task, id DESC);
  CREATE UNIQUE INDEX q_idempotency ON q (idempotency_key) WHERE idempotency_key IS NOT NULL;
  CREATE INDEX q_parent ON q (parent_id) WHERE parent_id IS NOT NULL;
  CREATE INDEX q_finished ON q USING brin (finished_at);
  CREATE TABLE qq (id bigint PRIMARY KEY, status text NOT NULL, priority smallint NOT NULL, run_at timestamptz NOT NULL, task text NOT NULL,
    timeout_ms int NOT NULL, locked_by text, locked_until timestamptz);
  CREATE INDEX qq_claim ON qq (priority DESC, run_at, id, timeout_ms, task) WHERE status = 'QUEUED';
  CREATE INDEX qq_reap ON qq (locked_until) WHERE status = 'RUNNING';
  CREATE INDEX qq_status ON qq (status, id DESC)`;
const SPLIT_STATEMENT = `WITH r AS MATERIALIZED (SELECT unnest($1::bigint[]) AS id),
  done_q AS (DELETE FROM qq USING r WHERE qq.id = r.id AND qq.locked_by = $2 AND qq.status = 'RUNNING' RETURNING qq.id),
  done AS (UPDATE q j SET status = 'DONE', locked_by = NULL, locked_until = NULL, finished_at = now(), result = NULL FROM done_q d WHERE j.id = d.id RETURNING j.id),
  next AS MATERIALIZED (SELECT id FROM qq WHERE status = 'QUEUED' AND run_at <= now() ORDER BY priority DESC, run_at, id LIMIT ${BATCH} FOR UPDATE SKIP LOCKED),
  claimed AS (UPDATE qq SET status = 'RUNNING', locked_by = $2, locked_until = now() + interval '30 seconds' WHERE qq.id = ANY (ARRAY(SELECT id FROM next)) RETURNING qq.id)
  UPDATE q j SET status = 'RUNNING', attempts = j.attempts + 1, locked_by = $2, locked_until = now() + interval '30 seconds'
   WHERE j.id = ANY (ARRAY(SELECT id FROM claimed)) RETURNING j.id, j.task, j.payload, j.attempts`;

interface Variant { name: string; table: string | null; statement: 'bare-done' | 'bare-delete' | 'skiplock' | 'split' }
const VARIANTS: Variant[] = [
  { name: 'minimal table, DONE by UPDATE', table: MINIMAL, statement: 'bare-done' },
  { name: 'minimal table, DELETE when done', table: MINIMAL, statement: 'bare-delete' },
  { name: "skiplock.job's columns, 2 indexes", table: WIDE('INCLUDING DEFAULTS INCLUDING IDENTITY'), statement: 'bare-done' },
  { name: '+ its CHECKs', table: WIDE('INCLUDING DEFAULTS INCLUDING IDENTITY INCLUDING CONSTRAINTS'), statement: 'bare-done' },
  { name: '+ its 14 indexes (= skiplock.job)', table: WIDE('INCLUDING ALL'), statement: 'bare-done' },
  { name: "skiplock's statement on skiplock.job", table: null, statement: 'skiplock' },
  // A HOT update needs room on the row's own page: with 80% filled, fewer than half were HOT.
  { name: 'prototype: the record HOT-updated (fillfactor 80) + a narrow queue table, its row deleted when done', table: SPLIT(80), statement: 'split' },
  { name: 'prototype, fillfactor 50', table: SPLIT(50), statement: 'split' },
];


async function run(url: string, v: Variant): Promise<{ jobsPerSec: number; cpuMsPerKJob: number; hotShare: number }> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    const table = v.table ? 'q' : 'skiplock.job';
    if (v.table) await c.query(v.table);
    await c.query(`INSERT INTO ${table} (task, payload) SELECT 'noop', '{}'::jsonb FROM generate_series(1, ${JOBS})`);
    if (v.statement === 'split') await c.query(`INSERT INTO qq SELECT id, status, priority, run_at, task, timeout_ms FROM q`);
    await c.query(`VACUUM ANALYZE`);
    const pid = (await c.query('SELECT pg_backend_pid() AS pid')).rows[0].pid as number;
    const cpu0 = pidCpuMs(pid);
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
        const text = v.statement === 'split' ? SPLIT_STATEMENT : bare(v.statement === 'bare-delete' ? DELETE : DONE);
        ids = (await c.query({ name: 'claim', text, values: [ids, 'w'] })).rows.map((row) => String(row.id));
      }
      handled += ids.length;
      if (ids.length === 0) break;
    }
    const ms = performance.now() - t0;
    const cpuMsPerKJob = ((pidCpuMs(pid) - cpu0) / handled) * 1000;
    if (handled !== JOBS) throw new Error(`${v.name}: ${handled} of ${JOBS} jobs`);
    await c.query('SELECT pg_stat_force_next_flush()');
    const { rows: [hot] } = await c.query(`SELECT n_tup_upd AS upd, n_tup_hot_upd AS hot FROM pg_stat_user_tables WHERE relid = '${table}'::regclass`);
    return { jobsPerSec: Math.round((handled / ms) * 1000), cpuMsPerKJob, hotShare: Number(hot.upd) ? Number(hot.hot) / Number(hot.upd) : 0 };
  } finally {
    await c.end();
  }
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const server = await startBenchServer();
try {
  const results = new Map<string, { jobsPerSec: number; cpuMsPerKJob: number; hotShare: number }[]>();
  let n = 0;
  for (let round = 1; round <= ROUNDS; round++) {
    const order = round % 2 ? VARIANTS : [...VARIANTS].reverse();
    for (const v of order) {
      const r = await run(await server.createDatabase(`breakdown_${++n}`, 'skiplock'), v);
      (results.get(v.name) ?? results.set(v.name, []).get(v.name)!).push(r);
      process.stderr.write(`[breakdown] round ${round} ${v.name}: ${r.jobsPerSec} jobs/s, ${r.cpuMsPerKJob.toFixed(1)} ms/1k, ${Math.round(100 * r.hotShare)}% of its UPDATEs HOT\n`);
    }
  }
  const lines = [
    `Cost breakdown, ${JOBS.toLocaleString('en')} no-op jobs, batches of ${BATCH}, one connection, ${ROUNDS} rounds interleaved; medians`,
    '',
    '| table and statement | jobs/s | backend CPU ms / 1,000 jobs | UPDATEs of the job table that were HOT |',
    '| --- | ---: | ---: | ---: |',
    ...VARIANTS.map((v) => {
      const rs = results.get(v.name)!;
      return `| ${v.name} | ${median(rs.map((r) => r.jobsPerSec)).toLocaleString('en')} | ${median(rs.map((r) => r.cpuMsPerKJob)).toFixed(1)} | ${Math.round(100 * median(rs.map((r) => r.hotShare)))}% |`;
    }),
  ];
  process.stdout.write(`${lines.join('\n')}\n`);
} finally {
  await server.stop();
}
