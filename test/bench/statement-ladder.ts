/**
 * The claim statement, built up from a bare claim-and-complete to skiplock's own, one piece at a
 * time (issue 23): which of its parts cost PostgreSQL what. Same loop as cost-breakdown.ts: one
 * connection, batches of 100 on skiplock.job, the backend's own CPU per 1,000 jobs, interleaved
 * rounds, medians. Each step adds to the one before it.
 *
 *   node --experimental-strip-types test/bench/statement-ladder.ts      BENCH_ROUNDS (5), BENCH_JOBS (20,000)
 */
import pg from 'pg';
import { completeAndClaim, type ResultRow } from '../../src/store/claim.ts';
import { pidCpuMs } from './cpu.ts';
import { startBenchServer } from './server.ts';

const ROUNDS = Number(process.env.BENCH_ROUNDS) || 5;
const JOBS = Number(process.env.BENCH_JOBS) || 20_000;
const B = 100;
const JSONR = `SELECT * FROM jsonb_to_recordset($1::jsonb) AS r(id bigint, attempt int, status text, result jsonb, error text, delay_ms bigint, release boolean, state jsonb, locked_by text, progress jsonb, trace text, run_at timestamptz, event_wait boolean)`;
const NOW = 'coalesce($3::timestamptz, now())';
const INLINE = `SELECT id FROM skiplock.job WHERE status = 'QUEUED' AND run_at <= ${NOW} AND task = ANY($4::text[]) ORDER BY priority DESC, run_at, id LIMIT ${B} FOR UPDATE SKIP LOCKED`;
const FUNC = `SELECT id FROM skiplock.claimable_jobs(${B}, ${NOW}, 3600000, $4::text[]) AS id`;
const FUNCP = `SELECT id FROM skiplock.claimable_jobs(${B}, ${NOW}, 3600000, ARRAY(SELECT unnest($4::text[]) EXCEPT SELECT name FROM skiplock.paused_task)) AS id`;
const DONE0 = `UPDATE skiplock.job j SET status = 'DONE', locked_by = NULL, locked_until = NULL, finished_at = now(), result = NULL FROM r WHERE j.id = r.id AND j.locked_by = $2 AND j.status = 'RUNNING' RETURNING j.id`;
const DONE1 = `UPDATE skiplock.job j SET status = 'DONE', result = r.result, finished_at = ${NOW}, locked_by = NULL, locked_until = NULL, cancel_requested = false, wait_woken = false, updated_at = ${NOW}, progress = coalesce(r.progress -> 'value', j.progress), finished_by = j.locked_by, finished_traceparent = r.trace FROM r WHERE j.id = ANY (ARRAY(SELECT id FROM r)) AND j.id = r.id AND j.status = 'RUNNING' AND j.locked_by = coalesce(r.locked_by, $2) AND j.attempts = r.attempt RETURNING j.id, j.status, j.schedule_name, j.schedule_state`;
const CL0 = `UPDATE skiplock.job j SET status = 'RUNNING', attempts = j.attempts + 1, locked_by = $2, locked_until = now() + interval '30 seconds' WHERE j.id = ANY (ARRAY(SELECT id FROM next)) RETURNING j.id, j.task, j.payload, j.attempts`;
const CL1 = `UPDATE skiplock.job j SET status = 'RUNNING', attempts = j.attempts + 1, locked_by = $2, locked_until = ${NOW} + least(j.timeout_ms + 5000, 30000) * interval '1 millisecond', updated_at = ${NOW}, started_at = ${NOW}, progress = NULL, debounce_key = NULL WHERE j.id = ANY (ARRAY(SELECT id FROM next)) RETURNING j.id, j.task, j.payload, j.attempts`;
const COLS = `j.id, j.task, j.payload, j.priority, j.attempts, j.max_attempts, j.timeout_ms, j.cancel_requested, j.last_error, j.idempotency_key, j.schedule_name, j.schedule_state, j.history, j.traceparent, j.parent_id, j.parent_step, j.pending_children, j.step_count, j.flow_key, j.rate_key, trunc(extract(epoch FROM j.run_at) * 1000)::bigint AS run_at_ms, trunc(extract(epoch FROM j.locked_until) * 1000)::bigint AS locked_until_ms, trunc(extract(epoch FROM j.created_at) * 1000)::bigint AS created_at_ms, trunc(extract(epoch FROM j.started_at) * 1000)::bigint AS started_at_ms, trunc(extract(epoch FROM j.scheduled_for) * 1000)::bigint AS scheduled_for_ms`;
const mk = (r: string, done: string, next: string, claimed: string, final = false) => final
  ? `WITH r AS MATERIALIZED (${r}), w AS (${done}), next AS MATERIALIZED (${next}), claimed AS (${claimed})
     SELECT x.written, claimed.* FROM (SELECT coalesce(jsonb_agg(id::text), '[]'::jsonb) AS written, coalesce(jsonb_agg(id::text) FILTER (WHERE status = 'CANCELLED'), '[]'::jsonb) AS cancelled,
       EXISTS (SELECT 1 FROM skiplock.job x WHERE x.status = 'RUNNING' AND x.locked_until < ${NOW}) AS reap_due FROM w) x FULL JOIN claimed ON false`
  : `WITH r AS MATERIALIZED (${r}), w AS (${done}), next AS MATERIALIZED (${next}) ${claimed}`;
const V: [string, (ids: string[]) => { text: string; values: unknown[] }][] = [];
const ids = (x: string[]) => x;
const json = (x: string[]) => JSON.stringify(x.map((id) => ({ id, attempt: 1, status: 'DONE', result: null, error: null, delay_ms: 0, release: false })));
/** A step: its text, and what its $1 is made of (the last batch's ids, as an array or as skiplock's JSON results). */
const v = (name: string, text: string, arg: (x: string[]) => unknown) => V.push([name, (x) => ({ text, values: [arg(x), 'w', null, ['noop']] })]);
v('B0 bare', mk('SELECT unnest($1::bigint[]) AS id', DONE0, INLINE, CL0), ids);
v('B1 + JSON results', mk(JSONR, DONE0, INLINE, CL0), json);
v('B2 + claimable_jobs()', mk(JSONR, DONE0, FUNC, CL0), json);
v('B3 + paused filter', mk(JSONR, DONE0, FUNCP, CL0), json);
v('B4 + full SET lists and fences', mk(JSONR, DONE1, FUNCP, CL1), json);
v('B5 + the claim answer columns', mk(JSONR, DONE1, FUNCP, CL1.replace('RETURNING j.id, j.task, j.payload, j.attempts', `RETURNING ${COLS}`)), json);
v('B6 + the answer (aggregates, reap probe)', mk(JSONR, DONE1, FUNCP, CL1.replace('RETURNING j.id, j.task, j.payload, j.attempts', `RETURNING ${COLS}`), true), json);
// skiplock's statement itself: also the schedule-state CTE, and the SET lists with a CASE per outcome.
V.push(['skiplock', (x) => { const s = completeAndClaim({ now: null, workerId: 'w', results: x.map((id): ResultRow => ({ id, attempt: 1, status: 'DONE', result: null, error: null, delay_ms: 0, release: false })), limit: B, budgetMs: 3_600_000, leaseMs: 30_000, leaseGraceMs: 5_000, tasks: ['noop'] }); return { text: s.text, values: [...s.values] }; }]);
const server = await startBenchServer();
const res = new Map<string, number[]>();
let n = 0;
try {
  for (let round = 0; round < ROUNDS; round++) for (const [name, build] of (round % 2 ? [...V].reverse() : V)) {
    const c = new pg.Client({ connectionString: await server.createDatabase(`ladder_${++n}`, 'skiplock') });
    c.on('error', () => {}); // the server's stop at the end must not crash a connection left open by a failure
    await c.connect();
    await c.query(`INSERT INTO skiplock.job (task, payload) SELECT 'noop', '{}'::jsonb FROM generate_series(1, ${JOBS})`);
    await c.query('VACUUM ANALYZE');
    const pid = (await c.query('SELECT pg_backend_pid() AS p')).rows[0].p;
    const c0 = pidCpuMs(pid);
    let cur: string[] = [], handled = 0;
    for (;;) {
      const q = build(cur);
      const rows = (await c.query({ name: 'q', text: q.text, values: q.values })).rows;
      cur = rows.filter((r) => r.id !== null).map((r) => String(r.id));
      handled += cur.length;
      if (!cur.length) break;
    }
    if (handled !== JOBS) throw new Error(`${name}: ${handled}`);
    (res.get(name) ?? res.set(name, []).get(name)!).push(((pidCpuMs(pid) - c0) / handled) * 1000);
    await c.end();
  }
  const lines = [`Statement ladder, ${JOBS.toLocaleString('en')} no-op jobs, batches of ${B}, one connection, ${ROUNDS} rounds interleaved; medians`, '',
    '| statement | backend CPU ms / 1,000 jobs |', '| --- | ---: |'];
  for (const [name] of V) {
    const xs = res.get(name)!.sort((a, b) => a - b);
    lines.push(`| ${name} | ${xs[Math.floor(xs.length / 2)]!.toFixed(1)} |`);
  }
  process.stdout.write(`${lines.join('\n')}\n`);
} finally {
  await server.stop();
}
