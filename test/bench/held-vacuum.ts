/**
 * Bloat under pressure (issue 33, item 4), as a prototype measurement: does a queue's claim keep
 * up when vacuum is held back? For each candidate model, the same offered load (a producer
 * inserting RATE jobs/s in small batches every 50 ms, 4 claimers each looping the model's
 * claim-and-complete statement: claim ≤ 100 FOR UPDATE SKIP LOCKED, the previous batch completed in
 * the same statement, no-op handlers, a 50 ms pause when a claim finds nothing) and these scenarios:
 *
 * - held: clean, then a transaction held open (REPEATABLE READ, an xid, one row read from a side
 *   table, then idle in transaction), then after it ends;
 * - readers: clean, then REPEATABLE READ readers that each open a transaction, count the queue
 *   table, hold it 3 s, commit, pause 1 s (two of them, 2 s apart, so a snapshot is always open),
 *   then after;
 * - idle: clean, then 300 idle connections held open to the model's database (plain sessions, each
 *   having run `SELECT 1`, then idle, not in a transaction: the outside harness's cell "300 idle
 *   connections held"), opened 25 at a time when the pressure phase starts, closed when it ends;
 * - held+idle: both at once (the held transaction and the 300 idle connections).
 * The server's max_connections is raised to 500 for this bench (the dev default, 300, does not fit
 * 300 idle sessions beside the bench's own and graphile-worker's pool of 102).
 *
 * Per 5 s window: jobs completed/s, claim statement time p50/p99 (client side), a job's wait from
 * its run_at to its claim, backlog (inserted − completed), n_dead_tup of the queue table(s) (each), the
 * oldest backend_xmin's age, autovacuum runs, PostgreSQL CPU, client backends (pg_stat_activity,
 * every database of the server). Per phase: throughput as a fraction
 * of the clean phase. And EXPLAIN (ANALYZE, BUFFERS) of the model's claim near each phase's end.
 *
 * Models (each its own database on one embedded PostgreSQL, autovacuum on with its defaults, naptime
 * 60 s as in the outside harness):
 *   today     the real skiplock schema (migrations) and completeAndClaim (src/store/claim.ts), DONE path
 *   narrow    a narrow queue table (rows deleted when done) + a record (fillfactor 50, HOT finish)
 *   rot5/10   the narrow queue LIST-partitioned over 3 slots, rotated every 5/10 s: the insert slot
 *             moves on, an old slot's QUEUED rows move to the current one, and it is TRUNCATEd once
 *             empty (lock_timeout 50 ms, retried at the next rotation), as PgQ does
 *   graphile  graphile-worker 0.18.0 (concurrentJobs 100, localQueue 500, batched completion)
 *   bounded   (an idea, measured) the narrow queue with its claim bounded below by a remembered position
 *   onetable  the one-table model from a checkout before migration 021 (HELD_ONE_TABLE_TREE): its
 *             own migrations and completeAndClaim, beside today's in the same run
 *
 *   node --experimental-strip-types test/bench/held-vacuum.ts   (npm run bench:held-vacuum)
 *   HELD_RATE (800), HELD_PHASES ("40,60,50": clean, held, after, seconds), READER_PHASES (same default),
 *   HELD_MODELS ("today,narrow,rot5,rot10,graphile,bounded"), HELD_SCENARIOS ("held,readers"; also
 *   "idle" and "held+idle", left out of the default to keep its ≈ 25 min: HELD_SCENARIOS=idle runs the
 *   idle cell, with HELD_PHASES), READER_MODELS (models of the readers scenario; default HELD_MODELS),
 *   HELD_OUT (a file for the markdown)
 */
import { writeFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Logger, makeWorkerUtils, run as runGraphile, runMigrations } from 'graphile-worker';
import pg from 'pg';
import { completeAndClaim, type ResultRow } from '../../src/store/claim.ts';
import { postgresCpuMs } from './cpu.ts';
import { seeded } from '../support/seed.ts';
import { startBenchServer, type BenchServer } from './server.ts';

const RATE = Number(process.env.HELD_RATE) || 800;
const CLAIMERS = 4;
const BATCH = 100;
const POLL_MS = 50;
const PRODUCER_MS = 50;
const WINDOW_MS = 5_000;
const READER_HOLD_MS = 3_000;
const READER_PAUSE_MS = 1_000;
const LOCK_TIMEOUT = '50ms';
const phasesOf = (text: string | undefined) => (text ?? '40,60,50').split(',').map((s) => Number(s) * 1000) as [number, number, number];
const HELD_PHASES = phasesOf(process.env.HELD_PHASES);
const READER_PHASES = phasesOf(process.env.READER_PHASES ?? process.env.HELD_PHASES);
const MODELS = (process.env.HELD_MODELS ?? 'today,narrow,rot5,rot10,graphile,bounded').split(',');
const READER_MODELS = (process.env.READER_MODELS ?? MODELS.join(',')).split(',');
const SCENARIOS = (process.env.HELD_SCENARIOS ?? 'held,readers').split(',') as Scenario[];
for (const s of SCENARIOS) if (!['held', 'readers', 'idle', 'held+idle'].includes(s)) throw new Error(`HELD_SCENARIOS: unknown scenario ${s}`);
type Scenario = 'held' | 'readers' | 'idle' | 'held+idle';
const IDLE_CONNECTIONS = 300;
const IDLE_OPEN_AT_ONCE = 25;
const PHASE_NAMES = ['clean', 'pressure', 'after'] as const;

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
const pct = (xs: number[], p: number) => {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
};

interface Claimed { id: string; attempt: number; runAtMs: number }
interface Query { name?: string; text: string; values: unknown[] }

/** A model driven by this script's own loops (every model but graphile-worker). */
interface SqlModel {
  key: string;
  name: string;
  kind: 'skiplock' | 'empty' | { template: string };
  setup: string | null;
  insert(n: number): Query;
  claim(workerId: string, previous: Claimed[]): Query;
  parse(rows: pg.QueryResultRow[], workerId: string): { claimed: Claimed[]; written: number };
  /** Session settings of the claimers (the prototypes' claims have no function to carry them). */
  claimerOptions?: string;
  /** The queue table(s) whose n_dead_tup is reported. */
  deadTables: string[];
  /** What a REPEATABLE READ reader scans. */
  readerSql: string;
  /** The claim's candidate query, for EXPLAIN (ANALYZE, BUFFERS); read from the database when it is a function of a connection. */
  explainSql: string | (() => string) | ((c: pg.Client) => Promise<string>);
  /** The claim's index (a partitioned one: its partitions' summed), whose size the probes report. */
  claimIndex: string;
  rotateEverySec?: number;
}

// ---------------------------------------------------------------------------------------------
// 1. skiplock's: the real schema and statement (since migration 021, the queue + record model;
//    the figures of the model before it, one table, are in test/bench/results/held-vacuum.md).

const TODAY: SqlModel = {
  key: 'today',
  name: 'skiplock (queue + record, migration 021; completeAndClaim)',
  kind: 'skiplock',
  setup: null,
  insert: (n) => ({ text: seeded(`INSERT INTO skiplock.job_record (task, payload) SELECT 'noop', '{}'::jsonb FROM generate_series(1, $1::int)`), values: [n] }),
  claim(workerId, previous) {
    const results: ResultRow[] = previous.map((j) => ({ id: j.id, attempt: j.attempt, status: 'DONE', result: null, error: null, delay_ms: 0, release: false }));
    const s = completeAndClaim({ now: null, workerId, results, limit: BATCH, budgetMs: 3_600_000, leaseMs: 30_000, leaseGraceMs: 5_000, tasks: ['noop'] });
    return { name: 'claim', text: s.text, values: [...s.values] };
  },
  parse(rows) {
    const claimed = rows.filter((r) => r.id !== null).map((r) => ({ id: String(r.id), attempt: Number(r.attempts), runAtMs: Number(r.run_at_ms) }));
    const w = rows.find((r) => r.id === null && r.written);
    return { claimed, written: w ? (w.written as unknown[]).length : 0 };
  },
  deadTables: ['skiplock.queue', 'skiplock.job_record'],
  readerSql: 'SELECT count(*) FROM skiplock.queue',
  claimIndex: 'skiplock.job_claim_idx',
  // The body of claimable_jobs, the plain claim's candidates, as the database holds it (a copy here
  // went stale when migration 022 narrowed job_claim_idx: the copy's EXPLAIN showed a seq scan the
  // claim never made), with its parameters filled in as the claimers' statement passes them.
  explainSql: async (c) => {
    const { rows: [f] } = await c.query(`SELECT prosrc FROM pg_proc WHERE oid = 'skiplock.claimable_jobs(int, timestamptz, int, text[])'::regprocedure`);
    return String(f.prosrc).trim()
      .replace(/\blim\b/g, String(BATCH)).replace(/\bat\b/g, 'now()').replace(/\bbudget_ms\b/g, '3600000').replace(/\btask_names\b/g, `'{noop}'::text[]`);
  },
};

/**
 * 1b. The one-table model, in the same run (issue 33: "against today's model ... in the same run"):
 * a checkout from before migration 021 (HELD_ONE_TABLE_TREE, e.g. `git worktree add ../one a88f128`),
 * its own migrations (a template the run makes) and its own completeAndClaim.
 */
async function oneTableModel(server: BenchServer): Promise<SqlModel> {
  const tree = process.env.HELD_ONE_TABLE_TREE;
  if (!tree) throw new Error('model onetable: set HELD_ONE_TABLE_TREE to a checkout from before migration 021');
  const load = (path: string) => import(pathToFileURL(resolve(tree, path)).href);
  const [{ completeAndClaim: oldClaim }, { migrate }, { loadMigrations }, { createPgDriver }] = await Promise.all(
    ['src/store/claim.ts', 'src/store/migrate.ts', 'src/store/migrations-fs.ts', 'src/store/drivers/pg.ts'].map(load),
  );
  await server.createTemplate('held_one_table_template', async (url) => {
    const sql = createPgDriver(url, { max: 1 });
    try {
      await migrate(sql, await loadMigrations(resolve(tree, 'migrations') + '/'));
    } finally {
      await sql.close();
    }
  });
  return {
    ...TODAY,
    key: 'onetable',
    name: `skiplock, one table (before migration 021: ${tree})`,
    kind: { template: 'held_one_table_template' },
    insert: (n) => ({ text: `INSERT INTO skiplock.job (task, payload) SELECT 'noop', '{}'::jsonb FROM generate_series(1, $1::int)`, values: [n] }),
    claim(workerId, previous) {
      const results: ResultRow[] = previous.map((j) => ({ id: j.id, attempt: j.attempt, status: 'DONE', result: null, error: null, delay_ms: 0, release: false }));
      const st = oldClaim({ now: null, workerId, results, limit: BATCH, budgetMs: 3_600_000, leaseMs: 30_000, leaseGraceMs: 5_000, tasks: ['noop'] }) as { text: string; values: unknown[] };
      return { name: 'claim', text: st.text, values: [...st.values] };
    },
    deadTables: ['skiplock.job'],
    readerSql: 'SELECT count(*) FROM skiplock.job',
  };
}

// ---------------------------------------------------------------------------------------------
// 2. A narrow queue + a record. 3. The same queue partitioned over rotated slots.

const RECORD = (schema: string) => `CREATE TABLE ${schema}.record (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, task text NOT NULL, payload jsonb NOT NULL, status text NOT NULL DEFAULT 'QUEUED',
    attempts int NOT NULL DEFAULT 0, result jsonb, created_at timestamptz NOT NULL DEFAULT now(), finished_at timestamptz
  ) WITH (fillfactor = 50);
  CREATE INDEX record_task_id ON ${schema}.record (task, id DESC);
  CREATE INDEX record_finished ON ${schema}.record USING brin (finished_at);`;
const QUEUE_COLUMNS = `id bigint NOT NULL, task text NOT NULL, priority smallint NOT NULL DEFAULT 0, run_at timestamptz NOT NULL DEFAULT now(),
    status text NOT NULL DEFAULT 'QUEUED', attempts int NOT NULL DEFAULT 0, locked_by text, locked_until timestamptz, timeout_ms int NOT NULL DEFAULT 10000`;
const QUEUE_INDEXES = (table: string) => `CREATE INDEX queue_claim ON ${table} (priority DESC, run_at, id, timeout_ms, task) WHERE status = 'QUEUED';
  CREATE INDEX queue_reap ON ${table} (locked_until) WHERE status = 'RUNNING';`;

const NARROW_SETUP = `CREATE SCHEMA nq; ${RECORD('nq')}
  CREATE TABLE nq.queue (${QUEUE_COLUMNS}, PRIMARY KEY (id)); ${QUEUE_INDEXES('nq.queue')}`;

const ROTATED_SETUP = `CREATE SCHEMA rq; ${RECORD('rq')}
  CREATE TABLE rq.queue (slot smallint NOT NULL, ${QUEUE_COLUMNS}) PARTITION BY LIST (slot);
  CREATE TABLE rq.queue_0 PARTITION OF rq.queue FOR VALUES IN (0);
  CREATE TABLE rq.queue_1 PARTITION OF rq.queue FOR VALUES IN (1);
  CREATE TABLE rq.queue_2 PARTITION OF rq.queue FOR VALUES IN (2);
  ${QUEUE_INDEXES('rq.queue')}
  CREATE INDEX queue_id ON rq.queue (id);
  CREATE TABLE rq.slot_state (one boolean PRIMARY KEY DEFAULT true CHECK (one), insert_slot smallint NOT NULL);
  INSERT INTO rq.slot_state (insert_slot) VALUES (0);
  -- An old slot (no insert reaches it any more) is truncated once no row is left in it. The lock
  -- first (lock_timeout is the session's), then the check under it: nothing touches the slot then.
  CREATE FUNCTION rq.truncate_if_empty(k int) RETURNS boolean LANGUAGE plpgsql AS $$
  BEGIN
    EXECUTE format('LOCK TABLE rq.queue_%s IN ACCESS EXCLUSIVE MODE', k);
    IF EXISTS (SELECT 1 FROM rq.queue WHERE slot = k) THEN RETURN false; END IF;
    EXECUTE format('TRUNCATE rq.queue_%s', k);
    RETURN true;
  END $$;`;

/** One statement: the previous batch deleted from the queue and written to its record, the next batch claimed, its payloads read from the records. */
const narrowClaim = (s: string, bounded = false) => `WITH done AS (
    DELETE FROM ${s}.queue q WHERE q.id = ANY ($1::bigint[]) AND q.status = 'RUNNING' AND q.locked_by = $2 RETURNING q.id, q.attempts
  ),
  fin AS (
    UPDATE ${s}.record r SET status = 'DONE', finished_at = now(), attempts = d.attempts
      FROM done d WHERE r.id = ANY (ARRAY(SELECT id FROM done)) AND r.id = d.id RETURNING r.id
  ),
  next AS MATERIALIZED (
    SELECT id FROM ${s}.queue WHERE status = 'QUEUED' AND run_at <= now() AND timeout_ms <= $3 AND task = ANY ($4::text[])${bounded ? ' AND run_at >= $6' : ''}
     ORDER BY priority DESC, run_at, id LIMIT $5 FOR UPDATE SKIP LOCKED
  ),
  claimed AS (
    UPDATE ${s}.queue q SET status = 'RUNNING', attempts = q.attempts + 1, locked_by = $2, locked_until = now() + interval '35 seconds'
     WHERE q.id = ANY (ARRAY(SELECT id FROM next)) RETURNING q.id, q.task, q.attempts, q.run_at
  )
  SELECT w.written, w.now_ms, c.id, c.task, c.attempts, p.payload, (extract(epoch FROM c.run_at) * 1000)::float8 AS run_at_ms
    FROM (SELECT count(*)::int AS written, (extract(epoch FROM now()) * 1000)::float8 AS now_ms FROM fin) w
    LEFT JOIN (claimed c CROSS JOIN LATERAL (SELECT payload FROM ${s}.record r WHERE r.id = c.id) p) ON true`;

const narrowExplain = (s: string, bound?: string) => `SELECT id FROM ${s}.queue WHERE status = 'QUEUED' AND run_at <= now() AND timeout_ms <= 3600000 AND task = ANY('{noop}'::text[])${bound ? ` AND run_at >= '${bound}'` : ''}
   ORDER BY priority DESC, run_at, id LIMIT ${BATCH} FOR UPDATE SKIP LOCKED`;

function narrowModel(key: string, name: string, schema: 'nq' | 'rq', rotateEverySec?: number): SqlModel {
  const slot = schema === 'rq';
  return {
    key,
    name,
    kind: 'empty',
    setup: slot ? ROTATED_SETUP : NARROW_SETUP,
    insert: (n) => ({
      text: `WITH r AS (INSERT INTO ${schema}.record (task, payload) SELECT 'noop', '{}'::jsonb FROM generate_series(1, $1::int) RETURNING id, task)
        INSERT INTO ${schema}.queue (${slot ? 'slot, ' : ''}id, task) SELECT ${slot ? '(SELECT insert_slot FROM rq.slot_state), ' : ''}id, task FROM r`,
      values: [n],
    }),
    claim: (workerId, previous) => ({ name: 'claim', text: narrowClaim(schema), values: [previous.map((j) => j.id), workerId, 3_600_000, ['noop'], BATCH] }),
    parse(rows) {
      const claimed = rows.filter((r) => r.id !== null).map((r) => ({ id: String(r.id), attempt: Number(r.attempts), runAtMs: Number(r.run_at_ms) }));
      return { claimed, written: Number(rows[0]?.written ?? 0) };
    },
    claimerOptions: '-c enable_sort=off -c enable_bitmapscan=off',
    deadTables: slot ? ['rq.queue_0', 'rq.queue_1', 'rq.queue_2'] : ['nq.queue'],
    readerSql: `SELECT count(*) FROM ${schema}.queue`,
    claimIndex: `${schema}.queue_claim`,
    explainSql: narrowExplain(schema),
    ...(rotateEverySec ? { rotateEverySec } : {}),
  };
}

/**
 * The optional idea: the narrow queue with a claim bounded below by a remembered position, so that
 * it does not walk the dead entries of the jobs already done. Each claimer makes an unbounded claim
 * every FULL_CLAIM_MS (so a job committed late, below the position, waits at most that long); the
 * position is then the oldest run_at that claim took (the database's now() when it took none), less
 * a margin; every other claim adds `run_at >= position`. Only sound as written for one priority
 * (the index leads with priority; PostgreSQL 18's skip scan might carry it over several).
 */
const FULL_CLAIM_MS = 2_000;
const POSITION_MARGIN_MS = 1_000;
function boundedModel(): SqlModel {
  const base = narrowModel('bounded', `narrow queue + record, claim bounded by a remembered position (an unbounded claim per claimer every ${FULL_CLAIM_MS / 1000} s, margin ${POSITION_MARGIN_MS / 1000} s)`, 'nq');
  let position: number | null = null;
  const lastFull = new Map<string, number>();
  const full = new Set<string>();
  return {
    ...base,
    explainSql: () => narrowExplain('nq', position === null ? undefined : new Date(position).toISOString()),
    claim(workerId, previous) {
      const values = [previous.map((j) => j.id), workerId, 3_600_000, ['noop'], BATCH];
      if (position === null || performance.now() - (lastFull.get(workerId) ?? 0) >= FULL_CLAIM_MS) {
        lastFull.set(workerId, performance.now());
        full.add(workerId);
        return { name: 'claim', text: narrowClaim('nq'), values };
      }
      full.delete(workerId);
      return { name: 'claim_bounded', text: narrowClaim('nq', true), values: [...values, new Date(position).toISOString()] };
    },
    parse(rows, workerId) {
      const r = base.parse(rows, workerId);
      if (full.has(workerId)) {
        const oldest = r.claimed.length ? Math.min(...r.claimed.map((j) => j.runAtMs)) : Number(rows[0]?.now_ms);
        if (Number.isFinite(oldest)) position = oldest - POSITION_MARGIN_MS;
      }
      return r;
    },
  };
}

/** The one-table model, made once per run (its template) when a scenario first asks for it. */
let oneTable: Promise<SqlModel> | undefined;

const SQL_MODELS: SqlModel[] = [
  TODAY,
  narrowModel('narrow', 'narrow queue (rows deleted) + record', 'nq'),
  narrowModel('rot5', 'narrow queue, 3 rotated slots, rotation 5 s', 'rq', 5),
  narrowModel('rot10', 'narrow queue, 3 rotated slots, rotation 10 s', 'rq', 10),
];

// ---------------------------------------------------------------------------------------------
// One run: a model under one scenario.

interface Window {
  t: number;
  phase: number;
  jobsPerSec: number;
  claims: number;
  claimP50: number;
  claimP99: number;
  waitP50: number;
  waitP99: number;
  backlog: number;
  deadTup: number;
  /** deadTup per table of the model's deadTables, in their order (today's: the queue, the record). */
  deadByTable: number[];
  xminAge: number;
  autovacuums: number;
  pgCpuPct: number;
  backends: number;
}
interface PhaseSummary {
  phase: string;
  jobsPerSec: number;
  fraction: number;
  claimP50: number;
  claimP99: number;
  waitP50: number;
  waitP99: number;
  maxBacklog: number;
  maxDeadTup: number;
  pgCpuMsPerKJob: number;
  maxBackends: number;
}
interface Probe { phase: string; t: number; executionMs: number; buffers: string; indexPages: number; plan: string }
interface RunResult {
  model: string;
  key: string;
  scenario: Scenario;
  phasesMs: [number, number, number];
  windows: Window[];
  phases: PhaseSummary[];
  probes: Probe[];
  rotation?: RotationStats;
  readerScans?: { scans: number; p50Ms: number; maxMs: number };
  errors: string[];
  inserted: number;
  completed: number;
}
interface RotationStats { rotations: number; skipped: number; moved: number; truncated: number; notEmpty: number; lockTimeouts: number; otherErrors: number }

/** What every model's run shares: counters, the windows, the phase controller. */
class Run {
  readonly t0 = performance.now();
  inserted = 0;
  completed = 0;
  stopped = false;
  readonly errors: string[] = [];
  /** Per phase: every claim's time and every job's wait (for the phase's percentiles). */
  readonly claimMs: number[][] = [[], [], []];
  readonly waitMs: number[][] = [[], [], []];
  winClaims: number[] = [];
  winWaits: number[] = [];
  readonly phasesMs: [number, number, number];
  constructor(phasesMs: [number, number, number]) {
    this.phasesMs = phasesMs;
  }
  get totalMs() { return this.phasesMs[0] + this.phasesMs[1] + this.phasesMs[2]; }
  elapsed() { return performance.now() - this.t0; }
  phaseAt(t: number) { return t < this.phasesMs[0] ? 0 : t < this.phasesMs[0] + this.phasesMs[1] ? 1 : 2; }
  claim(ms: number) {
    this.winClaims.push(ms);
    this.claimMs[this.phaseAt(this.elapsed())]!.push(ms);
  }
  wait(ms: number) {
    this.winWaits.push(ms);
    this.waitMs[this.phaseAt(this.elapsed())]!.push(ms);
  }
  error(where: string, e: unknown) {
    if (this.errors.length < 20) this.errors.push(`${where} at ${(this.elapsed() / 1000).toFixed(1)} s: ${String((e as Error)?.message ?? e)}`);
  }
  /** Sleeps until `at` ms into the run, or until stopped. */
  async until(at: number) {
    while (!this.stopped && this.elapsed() < at) await sleep(Math.min(200, at - this.elapsed()));
  }
}

async function connect(url: string, options?: string): Promise<pg.Client> {
  const c = new pg.Client({ connectionString: url, ...(options ? { options } : {}) });
  c.on('error', () => {});
  await c.connect();
  return c;
}

/** Inserts jobs at RATE, in one statement every PRODUCER_MS, catching up if a statement was slow. */
async function producer(run: Run, insert: (n: number) => Promise<void>) {
  while (!run.stopped && run.elapsed() < run.totalMs) {
    const due = Math.floor((RATE * run.elapsed()) / 1000) - run.inserted;
    if (due > 0) {
      try {
        await insert(due);
        run.inserted += due;
      } catch (e) {
        run.error('insert', e);
      }
    }
    await sleep(PRODUCER_MS);
  }
}

async function claimer(run: Run, model: SqlModel, url: string, workerId: string) {
  const c = await connect(url, model.claimerOptions);
  try {
    let previous: Claimed[] = [];
    while (!run.stopped) {
      const q = model.claim(workerId, previous);
      const t = performance.now();
      let rows: pg.QueryResultRow[];
      try {
        rows = (await c.query({ ...(q.name ? { name: q.name } : {}), text: q.text, values: q.values })).rows;
      } catch (e) {
        run.error(`claim ${workerId}`, e);
        await sleep(POLL_MS);
        continue;
      }
      run.claim(performance.now() - t);
      const { claimed, written } = model.parse(rows, workerId);
      if (written !== previous.length) run.error(`claim ${workerId}`, `${previous.length - written} of ${previous.length} results not written`);
      run.completed += written;
      const now = Date.now();
      for (const j of claimed) run.wait(now - j.runAtMs);
      previous = claimed;
      if (claimed.length === 0) await sleep(POLL_MS);
    }
  } finally {
    await c.end().catch(() => {});
  }
}

/** Every 5 s: the window's figures. */
async function sampler(run: Run, url: string, server: BenchServer, deadTables: string[], windows: Window[]) {
  const c = await connect(url);
  try {
    let last = { t: 0, completed: 0, av: -1, cpu: postgresCpuMs(server.postmasterPid) };
    for (let k = 1; ; k++) {
      await run.until(k * WINDOW_MS);
      if (run.stopped) break;
      const t = run.elapsed();
      const { rows: [s] } = await c.query(
        `SELECT (SELECT coalesce(sum(n_dead_tup), 0)::bigint FROM pg_stat_user_tables WHERE relid = ANY ($1::regclass[])) AS dead,
                ARRAY(SELECT coalesce((SELECT n_dead_tup FROM pg_stat_user_tables WHERE relid = t), 0)::float8 FROM unnest($1::regclass[]) WITH ORDINALITY u(t, i) ORDER BY i) AS dead_by_table,
                (SELECT coalesce(sum(autovacuum_count), 0)::int FROM pg_stat_user_tables WHERE relid = ANY ($1::regclass[])) AS av,
                (SELECT coalesce(max(age(backend_xmin)), 0)::int FROM pg_stat_activity WHERE datname = current_database()) AS xmin_age,
                (SELECT count(*)::int FROM pg_stat_activity WHERE backend_type = 'client backend') AS backends`,
        [deadTables],
      );
      const cpu = postgresCpuMs(server.postmasterPid);
      windows.push({
        t: Math.round(t / 1000),
        phase: run.phaseAt(t - WINDOW_MS / 2),
        jobsPerSec: ((run.completed - last.completed) / (t - last.t)) * 1000,
        claims: run.winClaims.length,
        claimP50: pct(run.winClaims, 50),
        claimP99: pct(run.winClaims, 99),
        waitP50: pct(run.winWaits, 50),
        waitP99: pct(run.winWaits, 99),
        backlog: run.inserted - run.completed,
        deadTup: Number(s.dead),
        deadByTable: (s.dead_by_table as number[]).map(Number),
        xminAge: Number(s.xmin_age),
        autovacuums: last.av < 0 ? 0 : Number(s.av) - last.av,
        pgCpuPct: ((cpu - last.cpu) / (t - last.t)) * 100,
        backends: Number(s.backends),
      });
      const w = windows.at(-1)!;
      process.stderr.write(`[held] ${(w.t + 's').padStart(5)} ${PHASE_NAMES[w.phase]!.padEnd(8)} ${w.jobsPerSec.toFixed(0).padStart(5)} jobs/s, claim p50 ${w.claimP50.toFixed(1)} p99 ${w.claimP99.toFixed(1)} ms (${w.claims}), wait p50 ${w.waitP50.toFixed(0)} ms, backlog ${w.backlog}, dead ${w.deadTup}, xmin age ${w.xminAge}, av ${w.autovacuums}, pg cpu ${w.pgCpuPct.toFixed(0)}%, backends ${w.backends}\n`);
      run.winClaims = [];
      run.winWaits = [];
      last = { t, completed: run.completed, av: Number(s.av), cpu };
    }
  } finally {
    await c.end().catch(() => {});
  }
}

/** The pressure: a transaction held open through phase 2, idle connections, both, or REPEATABLE READ readers of the queue. */
async function pressure(run: Run, url: string, scenario: Scenario, readerSql: string, readerScans: number[]) {
  const [clean, held] = run.phasesMs;
  await run.until(clean);
  if (run.stopped) return;
  if (scenario === 'idle') return idleConnections(run, url);
  if (scenario === 'held+idle') {
    await Promise.all([pressure(run, url, 'held', readerSql, readerScans), idleConnections(run, url)]);
    return;
  }
  if (scenario === 'held') {
    const c = await connect(url);
    try {
      await c.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
      await c.query('SELECT txid_current()');
      await c.query('SELECT 1 FROM public.side LIMIT 1');
      await run.until(clean + held);
      await c.query('COMMIT');
    } finally {
      await c.end().catch(() => {});
    }
    return;
  }
  const reader = async (offset: number) => {
    const c = await connect(url);
    try {
      await sleep(offset);
      while (!run.stopped && run.elapsed() < clean + held - READER_HOLD_MS) {
        await c.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
        const t = performance.now();
        await c.query(readerSql);
        readerScans.push(performance.now() - t);
        await sleep(READER_HOLD_MS);
        await c.query('COMMIT');
        await sleep(READER_PAUSE_MS);
      }
    } catch (e) {
      run.error('reader', e);
    } finally {
      await c.end().catch(() => {});
    }
  };
  await Promise.all([reader(0), reader((READER_HOLD_MS + READER_PAUSE_MS) / 2)]);
}

/** IDLE_CONNECTIONS sessions opened (IDLE_OPEN_AT_ONCE at a time), each having run one statement, held idle through phase 2, then closed. */
async function idleConnections(run: Run, url: string) {
  const [clean, held] = run.phasesMs;
  const open: pg.Client[] = [];
  try {
    for (let i = 0; i < IDLE_CONNECTIONS && !run.stopped; i += IDLE_OPEN_AT_ONCE) {
      const batch = await Promise.allSettled(Array.from({ length: Math.min(IDLE_OPEN_AT_ONCE, IDLE_CONNECTIONS - i) }, async () => {
        const c = await connect(url);
        open.push(c);
        await c.query('SELECT 1');
      }));
      for (const b of batch) if (b.status === 'rejected') run.error('idle connection', b.reason);
    }
    process.stderr.write(`[held] ${open.length} idle connections open at ${(run.elapsed() / 1000).toFixed(1)} s\n`);
    await run.until(clean + held);
  } finally {
    await Promise.all(open.map((c) => c.end().catch(() => {})));
  }
}

/** EXPLAIN (ANALYZE, BUFFERS) of the claim's candidates, 3 s before each phase ends (rolled back: its row locks last a moment). */
async function probes(run: Run, url: string, sql: SqlModel['explainSql'], claimIndex: string, out: Probe[]) {
  const c = await connect(url);
  try {
    let end = 0;
    for (let p = 0; p < 3; p++) {
      end += run.phasesMs[p]!;
      await run.until(end - 3_000);
      if (run.stopped) return;
      try {
        await c.query('BEGIN');
        await c.query('SET LOCAL enable_sort = off');
        await c.query('SET LOCAL enable_bitmapscan = off');
        const { rows } = await c.query(`EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) ${typeof sql === 'function' ? await sql(c) : sql}`);
        const plan = rows.map((r) => String(r['QUERY PLAN'])).join('\n');
        const { rows: [size] } = await c.query(`SELECT coalesce((SELECT sum(pg_relation_size(relid)) FROM pg_partition_tree($1::regclass)), pg_relation_size($1::regclass)) / 8192 AS pages`, [claimIndex]);
        out.push({
          phase: PHASE_NAMES[p]!,
          t: Math.round(run.elapsed() / 1000),
          executionMs: Number(/Execution Time: ([\d.]+)/.exec(plan)?.[1] ?? NaN),
          buffers: /Buffers: ([^\n]+)/.exec(plan)?.[1] ?? '',
          indexPages: Number(size.pages),
          plan,
        });
      } catch (e) {
        run.error('explain', e);
      } finally {
        await c.query('ROLLBACK').catch(() => {});
      }
    }
  } finally {
    await c.end().catch(() => {});
  }
}

/**
 * The rotation (PgQ's answer): every R s the insert slot moves on to a clean (truncated) slot, and
 * each slot that has not received inserts for R s has its QUEUED rows moved to the insert slot (one
 * statement; RUNNING rows stay: they are deleted by their own completion) and is truncated once empty.
 */
async function rotator(run: Run, url: string, everySec: number, stats: RotationStats) {
  const c = await connect(url);
  await c.query(`SET lock_timeout = '${LOCK_TIMEOUT}'`);
  const state: ('insert' | 'draining' | 'clean')[] = ['insert', 'clean', 'clean'];
  /** The rotation that made each slot draining: it is emptied and truncated from the next one on (it has had R s to drain). */
  const demotedAt = [0, 0, 0];
  try {
    for (let k = 1; ; k++) {
      await run.until(k * everySec * 1000);
      if (run.stopped || run.elapsed() >= run.totalMs) break;
      let insert = state.indexOf('insert');
      const clean = state.indexOf('clean');
      if (clean >= 0) {
        try {
          await c.query('UPDATE rq.slot_state SET insert_slot = $1', [clean]);
          state[insert] = 'draining';
          demotedAt[insert] = k;
          state[clean] = 'insert';
          insert = clean;
          stats.rotations++;
        } catch (e) {
          stats.otherErrors++;
          run.error('rotate', e);
        }
      } else stats.skipped++;
      for (let slot = 0; slot < 3; slot++) {
        if (state[slot] !== 'draining' || demotedAt[slot] === k) continue;
        try {
          const moved = await c.query(
            `WITH m AS (DELETE FROM rq.queue_${slot} WHERE status = 'QUEUED' RETURNING *)
             INSERT INTO rq.queue (slot, id, task, priority, run_at, status, attempts, locked_by, locked_until, timeout_ms)
             SELECT $1, id, task, priority, run_at, status, attempts, locked_by, locked_until, timeout_ms FROM m`,
            [insert],
          );
          stats.moved += moved.rowCount ?? 0;
          const { rows: [r] } = await c.query('SELECT rq.truncate_if_empty($1) AS ok', [slot]);
          if (r.ok) {
            state[slot] = 'clean';
            stats.truncated++;
          } else stats.notEmpty++;
        } catch (e) {
          if ((e as { code?: string }).code === '55P03') stats.lockTimeouts++;
          else {
            stats.otherErrors++;
            run.error('truncate', e);
          }
        }
      }
    }
  } finally {
    await c.end().catch(() => {});
  }
}

function summarize(run: Run, windows: Window[], cpuByPhase: number[]): PhaseSummary[] {
  const out: PhaseSummary[] = [];
  for (let p = 0; p < 3; p++) {
    const ws = windows.filter((w) => w.phase === p);
    const jobs = ws.reduce((a, w) => a + (w.jobsPerSec * WINDOW_MS) / 1000, 0);
    const jobsPerSec = ws.length ? jobs / ((ws.length * WINDOW_MS) / 1000) : NaN;
    out.push({
      phase: PHASE_NAMES[p]!,
      jobsPerSec,
      fraction: jobsPerSec / (out[0]?.jobsPerSec ?? jobsPerSec),
      claimP50: pct(run.claimMs[p]!, 50),
      claimP99: pct(run.claimMs[p]!, 99),
      waitP50: pct(run.waitMs[p]!, 50),
      waitP99: pct(run.waitMs[p]!, 99),
      maxBacklog: Math.max(...ws.map((w) => w.backlog)),
      maxDeadTup: Math.max(...ws.map((w) => w.deadTup)),
      pgCpuMsPerKJob: jobs ? (cpuByPhase[p]! / jobs) * 1000 : NaN,
      maxBackends: Math.max(...ws.map((w) => w.backends)),
    });
  }
  return out;
}

/** PostgreSQL CPU (ms) spent in each phase, read at the phase boundaries. */
async function cpuByPhase(run: Run, server: BenchServer, out: number[]) {
  let end = 0;
  let last = postgresCpuMs(server.postmasterPid);
  for (let p = 0; p < 3; p++) {
    end += run.phasesMs[p]!;
    await run.until(end);
    const now = postgresCpuMs(server.postmasterPid);
    out[p] = now - last;
    last = now;
  }
}

async function runSqlModel(server: BenchServer, model: SqlModel, scenario: Scenario, phasesMs: [number, number, number], db: string): Promise<RunResult> {
  const url = await server.createDatabase(db, model.kind);
  const setup = await connect(url);
  await setup.query('CREATE TABLE public.side (id int PRIMARY KEY); INSERT INTO public.side VALUES (1)');
  if (model.setup) await setup.query(model.setup);
  await setup.query('VACUUM ANALYZE');
  const run = new Run(phasesMs);
  const windows: Window[] = [];
  const probeOut: Probe[] = [];
  const readerScans: number[] = [];
  const cpu: number[] = [];
  const rotation: RotationStats = { rotations: 0, skipped: 0, moved: 0, truncated: 0, notEmpty: 0, lockTimeouts: 0, otherErrors: 0 };
  const insertConn = await connect(url);
  const tasks = [
    producer(run, async (n) => void (await insertConn.query({ name: 'insert', ...model.insert(n) }))),
    ...Array.from({ length: CLAIMERS }, (_, i) => claimer(run, model, url, `w${i + 1}`)),
    sampler(run, url, server, model.deadTables, windows),
    pressure(run, url, scenario, model.readerSql, readerScans),
    probes(run, url, model.explainSql, model.claimIndex, probeOut),
    cpuByPhase(run, server, cpu),
    ...(model.rotateEverySec ? [rotator(run, url, model.rotateEverySec, rotation)] : []),
  ];
  await run.until(run.totalMs + 200);
  run.stopped = true;
  await Promise.all(tasks.map((t) => t.catch((e) => run.error('task', e))));
  await insertConn.end();
  await setup.end();
  return finish(model.name, model.key, scenario, run, windows, cpu, probeOut, readerScans, model.rotateEverySec ? rotation : undefined);
}

function finish(name: string, key: string, scenario: Scenario, run: Run, windows: Window[], cpu: number[], probeOut: Probe[], readerScans: number[], rotation?: RotationStats): RunResult {
  return {
    model: name,
    key,
    scenario,
    phasesMs: run.phasesMs,
    windows,
    phases: summarize(run, windows, cpu),
    probes: probeOut,
    ...(rotation ? { rotation } : {}),
    ...(scenario === 'readers' ? { readerScans: { scans: readerScans.length, p50Ms: pct(readerScans, 50), maxMs: Math.max(0, ...readerScans) } } : {}),
    errors: run.errors,
    inserted: run.inserted,
    completed: run.completed,
  };
}

// ---------------------------------------------------------------------------------------------
// 4. graphile-worker 0.18.0 under the same offered load and pressure.

const quiet = new Logger(() => (level, message) => {
  if (level === 'error') console.error('[graphile-worker]', message);
});

async function runGraphileModel(server: BenchServer, scenario: Scenario, phasesMs: [number, number, number], db: string): Promise<RunResult> {
  const url = await server.createDatabase(db, 'empty');
  const setup = await connect(url);
  await setup.query('CREATE TABLE public.side (id int PRIMARY KEY); INSERT INTO public.side VALUES (1)');
  await runMigrations({ connectionString: url, logger: quiet });
  await setup.query('VACUUM ANALYZE');
  const run = new Run(phasesMs);
  const windows: Window[] = [];
  const readerScans: number[] = [];
  const cpu: number[] = [];
  // Its claim is its get_job statement (prepared, named get_job<batch>/…): timed on pg's Client.
  const original = pg.Client.prototype.query;
  pg.Client.prototype.query = function (this: pg.Client, config: unknown, ...rest: unknown[]) {
    const result = (original as (...a: unknown[]) => unknown).call(this, config, ...rest);
    const name = typeof config === 'object' && config !== null ? (config as { name?: unknown }).name : undefined;
    if (typeof name === 'string' && name.startsWith('get_job') && result instanceof Promise) {
      const t = performance.now();
      result.then(() => run.claim(performance.now() - t), () => {});
    }
    return result;
  } as typeof original;
  const utils = await makeWorkerUtils({ connectionString: url, logger: quiet });
  const runner = await runGraphile({
    connectionString: url,
    concurrency: 100,
    noHandleSignals: true,
    logger: quiet,
    taskList: {
      noop: (payload) => {
        run.completed++;
        run.wait(Date.now() - (payload as { t: number }).t);
      },
    },
    preset: { worker: { concurrentJobs: 100, maxPoolSize: 102, localQueue: { size: 500 }, completeJobBatchDelay: 0, failJobBatchDelay: 0 } },
  });
  try {
    const tasks = [
      producer(run, async (n) => void (await utils.addJobs(Array.from({ length: n }, () => ({ identifier: 'noop', payload: { t: Date.now() } }))))),
      sampler(run, url, server, ['graphile_worker._private_jobs'], windows),
      pressure(run, url, scenario, 'SELECT count(*) FROM graphile_worker._private_jobs', readerScans),
      cpuByPhase(run, server, cpu),
    ];
    await run.until(run.totalMs + 200);
    run.stopped = true;
    await Promise.all(tasks.map((t) => t.catch((e) => run.error('task', e))));
  } finally {
    await runner.stop();
    await utils.release();
    await setup.end();
    pg.Client.prototype.query = original;
  }
  return finish('graphile-worker 0.18.0 (concurrentJobs 100, localQueue 500)', 'graphile', scenario, run, windows, cpu, [], readerScans);
}

// ---------------------------------------------------------------------------------------------
// The report.

const f0 = (x: number) => (Number.isFinite(x) ? Math.round(x).toLocaleString('en') : '–');
const f1 = (x: number) => (Number.isFinite(x) ? (x < 10 ? x.toFixed(1) : Math.round(x).toLocaleString('en')) : '–');
const pc = (x: number) => (Number.isFinite(x) ? `${Math.round(x * 100)}%` : '–');

function report(results: RunResult[], server: BenchServer, claimPlan: string): string {
  const lines: string[] = [];
  const scen = (s: Scenario, ph: number[]) => {
    const during = `from ${ph[0]! / 1000} s for ${ph[1]! / 1000} s`;
    const idle = `${IDLE_CONNECTIONS} idle connections (each ran SELECT 1, not in a transaction) held open to the model's database`;
    if (s === 'held') return `held: a REPEATABLE READ transaction with an xid held idle ${during}`;
    if (s === 'idle') return `idle: ${idle} ${during}`;
    if (s === 'held+idle') return `held+idle: a REPEATABLE READ transaction with an xid held idle and ${idle}, ${during}`;
    return `readers: two REPEATABLE READ readers counting the queue table ${during} (hold ${READER_HOLD_MS / 1000} s, pause ${READER_PAUSE_MS / 1000} s, 2 s apart)`;
  };
  lines.push(
    `Held-back vacuum (issue 33, item 4): ${RATE} jobs/s offered (a batch every ${PRODUCER_MS} ms), ${CLAIMERS} claimers × ≤ ${BATCH} (a ${POLL_MS} ms pause after an empty claim), no-op handlers.`,
    `PostgreSQL ${server.version}, embedded, fsync ${server.durable ? 'on' : 'off'}, autovacuum on with its defaults (naptime 60 s). Phases: clean, pressure, after. Claim = the client-side time of the claim-and-complete statement; wait = from a job's run_at to its claim.`,
    '',
    '| model | scenario | phase | jobs/s | vs clean | claim p50 / p99 ms | job wait p50 / p99 ms | max backlog | max n_dead_tup | PostgreSQL CPU ms / 1,000 jobs | max client backends |',
    '| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
  );
  for (const r of results) {
    for (const p of r.phases) {
      lines.push(`| ${r.key} | ${r.scenario} | ${p.phase} | ${f0(p.jobsPerSec)} | ${pc(p.fraction)} | ${f1(p.claimP50)} / ${f1(p.claimP99)} | ${f0(p.waitP50)} / ${f0(p.waitP99)} | ${f0(p.maxBacklog)} | ${f0(p.maxDeadTup)} | ${f0(p.pgCpuMsPerKJob)} | ${f0(p.maxBackends)} |`);
    }
  }
  lines.push('', 'Models:', ...[...new Map(results.map((r) => [r.key, r.model])).entries()].map(([k, m]) => `- ${k}: ${m}`), '');
  lines.push('Scenarios:', ...[...new Map(results.map((r) => [r.scenario, scen(r.scenario, r.phasesMs)])).values()].map((s) => `- ${s}`), '');
  const rot = results.filter((r) => r.rotation);
  if (rot.length) {
    lines.push('Rotation (rotated models): rotations done / skipped (no clean slot), QUEUED rows moved, slots truncated, not empty yet, TRUNCATE lock timeouts (50 ms), other errors', '');
    lines.push('| model | scenario | rotations | skipped | moved | truncated | not empty | lock timeouts | errors |', '| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |');
    for (const r of rot) {
      const s = r.rotation!;
      lines.push(`| ${r.key} | ${r.scenario} | ${s.rotations} | ${s.skipped} | ${s.moved} | ${s.truncated} | ${s.notEmpty} | ${s.lockTimeouts} | ${s.otherErrors} |`);
    }
    lines.push('');
  }
  const readers = results.filter((r) => r.readerScans);
  if (readers.length) {
    lines.push('Reader scans (count of the queue table): ' + readers.map((r) => `${r.key} ${r.readerScans!.scans} scans, p50 ${f1(r.readerScans!.p50Ms)} ms, max ${f1(r.readerScans!.maxMs)} ms`).join('; '), '');
  }
  lines.push('EXPLAIN (ANALYZE, BUFFERS) of the claim\'s candidate query, 3 s before each phase ends (top node\'s buffers, execution time, the claim index\'s size):', '');
  lines.push('| model | scenario | clean | pressure | after |', '| --- | --- | --- | --- | --- |');
  for (const r of results.filter((x) => x.probes.length)) {
    const cell = (ph: string) => {
      const p = r.probes.find((x) => x.phase === ph);
      return p ? `${p.buffers}; ${f1(p.executionMs)} ms; index ${p.indexPages} pages` : '–';
    };
    lines.push(`| ${r.key} | ${r.scenario} | ${cell('clean')} | ${cell('pressure')} | ${cell('after')} |`);
  }
  lines.push('', 'The partitioned claim\'s plan (EXPLAIN, no ANALYZE, at setup):', '', '```', claimPlan, '```', '');
  for (const r of results) {
    lines.push(`### ${r.key}, ${r.scenario}: per 5 s window`, '');
    lines.push(`inserted ${f0(r.inserted)}, completed ${f0(r.completed)}${r.errors.length ? `; errors: ${r.errors.join(' | ')}` : ''}`, '');
    lines.push('| t s | phase | jobs/s | claims | claim p50 / p99 ms | wait p50 / p99 ms | backlog | n_dead_tup (per table when several) | xmin age | autovacuum | PG CPU % | backends |', '| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |');
    for (const w of r.windows) {
      lines.push(`| ${w.t} | ${PHASE_NAMES[w.phase]} | ${f0(w.jobsPerSec)} | ${w.claims} | ${f1(w.claimP50)} / ${f1(w.claimP99)} | ${f0(w.waitP50)} / ${f0(w.waitP99)} | ${f0(w.backlog)} | ${f0(w.deadTup)}${w.deadByTable?.length > 1 ? ` (${w.deadByTable.map(f0).join(' + ')})` : ''} | ${f0(w.xminAge)} | ${w.autovacuums || ''} | ${f0(w.pgCpuPct)} | ${w.backends} |`);
    }
    for (const p of r.probes) lines.push('', `EXPLAIN at ${p.t} s (${p.phase}; claim index ${p.indexPages} pages):`, '', '```', p.plan, '```');
    lines.push('');
  }
  return lines.join('\n');
}

// ---------------------------------------------------------------------------------------------

// max_connections: 300 idle sessions + the bench's own (≤ 12) + graphile-worker's pool (102) + its utils' pool.
const server = await startBenchServer({ settings: { autovacuum: 'on', autovacuum_naptime: '60s', max_connections: '500' } });
const results: RunResult[] = [];
let claimPlan = '';
try {
  {
    const url = await server.createDatabase('held_plan', 'empty');
    const c = await connect(url, '-c enable_sort=off -c enable_bitmapscan=off');
    await c.query(ROTATED_SETUP);
    await c.query(`INSERT INTO rq.record (task, payload) SELECT 'noop', '{}' FROM generate_series(1, 3000)`);
    await c.query(`INSERT INTO rq.queue (slot, id, task) SELECT id % 3, id, task FROM rq.record`);
    await c.query('ANALYZE');
    claimPlan = (await c.query(`EXPLAIN ${narrowExplain('rq')}`)).rows.map((r) => String(r['QUERY PLAN'])).join('\n');
    await c.end();
    process.stderr.write(`[held] partitioned claim plan:\n${claimPlan}\n`);
  }
  let n = 0;
  for (const scenario of SCENARIOS) {
    const phasesMs = scenario === 'readers' ? READER_PHASES : HELD_PHASES;
    for (const key of scenario === 'readers' ? READER_MODELS : MODELS) {
      const db = `held_${++n}`;
      process.stderr.write(`[held] ${new Date().toISOString()} ${key}, ${scenario} (${phasesMs.map((p) => p / 1000).join(' + ')} s)\n`);
      const model = key === 'bounded' ? boundedModel() : key === 'onetable' ? await (oneTable ??= oneTableModel(server)) : SQL_MODELS.find((m) => m.key === key);
      const r = model ? await runSqlModel(server, model, scenario, phasesMs, db) : key === 'graphile' ? await runGraphileModel(server, scenario, phasesMs, db) : undefined;
      if (!r) throw new Error(`unknown model ${key}`);
      results.push(r);
      for (const p of r.phases) process.stderr.write(`[held]   ${p.phase}: ${f0(p.jobsPerSec)} jobs/s (${pc(p.fraction)}), claim p50 ${f1(p.claimP50)} p99 ${f1(p.claimP99)} ms, max backlog ${p.maxBacklog}, max dead ${p.maxDeadTup}\n`);
      // Its bloat is not the next model's: no autovacuum of this database during the next run.
      await new pg.Client({ connectionString: server.adminUrl }).connect().then(async (c) => {
        await c.query(`DROP DATABASE ${db} WITH (FORCE)`).catch((e) => process.stderr.write(`[held] drop ${db}: ${e}\n`));
        await c.end();
      });
    }
  }
  const md = report(results, server, claimPlan);
  process.stdout.write(`${md}\n`);
  if (process.env.HELD_OUT) {
    await writeFile(process.env.HELD_OUT, `${md}\n`);
    await writeFile(process.env.HELD_OUT.replace(/\.md$/, '') + '.json', JSON.stringify(results, null, 1));
  }
} finally {
  await server.stop();
}
