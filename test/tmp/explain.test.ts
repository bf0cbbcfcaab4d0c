import { test } from 'vitest';
import { completeAndClaim, type ResultRow } from '../../src/store/claim.ts';
import { statement } from '../../src/store/sql.ts';
import { createPgDriver } from '../../src/store/drivers/pg.ts';
import { createTestDb } from '../support/db.ts';
import { seeded } from '../support/seed.ts';

test('explain', async () => {
  const made = await createTestDb();
  const db = { sql: createPgDriver(made.url, { max: 1 }), drop: async () => { await db.sql.close(); await made.drop(); } };
  await db.sql.query(statement(seeded(`INSERT INTO skiplock.job_record (task, payload) SELECT 'noop', '{}'::jsonb FROM generate_series(1, 20000)`)));
  await db.sql.query(statement(`ANALYZE`));
  let results: ResultRow[] = [];
  const step = (explain: boolean) => {
    const s = completeAndClaim({ now: null, workerId: 'w', results, limit: 100, budgetMs: 3_600_000, leaseMs: 30_000, leaseGraceMs: 5_000, tasks: ['noop'] });
    return explain ? statement(`EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) ${s.text}`, s.values) : s;
  };
  for (let i = 0; i < 30; i++) {
    const rows = await db.sql.query(step(false));
    results = rows.filter((r) => r.id != null).map((r) => ({ id: String(r.id), attempt: Number(r.attempts), status: 'DONE', result: null, error: null, delay_ms: 0, release: false }));
  }
  await db.sql.query(statement(`SELECT pg_stat_force_next_flush()`));
  await new Promise((r) => setTimeout(r, 200));
  console.log(JSON.stringify(await db.sql.query(statement(`SELECT relname, n_tup_upd, n_tup_hot_upd, n_tup_del, n_tup_ins FROM pg_stat_user_tables WHERE schemaname = 'skiplock' AND relname IN ('job_record', 'queue')`))));
  const plan = await db.sql.query(step(true));
  if (process.env.PLAN) console.log(plan.map((r) => r['QUERY PLAN']).join('\n'));
  await db.drop();
}, 120_000);
