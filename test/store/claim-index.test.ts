/**
 * The claim passes over jobs this deployment cannot take (another service's backlog in a shared
 * database, timeouts over the budget) on their claim-index entries, without reading their rows:
 * counted as heap blocks read by one claim (pg_statio), not timed.
 */
import pg from 'pg';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { statement } from '../../src/store/sql.ts';
import { createTestDb, type TestDb } from '../support/db.ts';

let db: TestDb;
let client: pg.Client;
beforeAll(async () => {
  db = await createTestDb();
  client = new pg.Client({ connectionString: db.url });
  await client.connect();
});
afterAll(async () => {
  await client.end();
  await db.drop();
});

/** Heap blocks of skiplock.queue (the live jobs, what the claim reads) that `sql` reads, in this session. */
async function heapBlocksRead(sql: string): Promise<number> {
  const read = async () => {
    await client.query('SELECT pg_stat_force_next_flush()');
    const { rows } = await client.query(`SELECT heap_blks_hit + heap_blks_read AS n FROM pg_statio_user_tables WHERE schemaname = 'skiplock' AND relname = 'queue'`);
    return Number(rows[0].n);
  };
  const before = await read();
  await client.query('BEGIN');
  await client.query(sql);
  await client.query('ROLLBACK');
  return (await read()) - before;
}

test('a claim reads only the rows it can take, not the due jobs of other tasks or over-budget timeouts ahead of them', async () => {
  await db.sql.query(statement(`INSERT INTO skiplock.job (task, run_at, created_at) SELECT 'other-service', now() - interval '1 hour', now() FROM generate_series(1, 20000)`));
  await db.sql.query(statement(`INSERT INTO skiplock.job (task, run_at, timeout_ms) SELECT 'ours', now() - interval '30 minutes', 600000 FROM generate_series(1, 20000)`));
  await db.sql.query(statement(`INSERT INTO skiplock.job (task) SELECT 'ours' FROM generate_series(1, 5)`));
  await client.query('VACUUM ANALYZE skiplock.queue, skiplock.job_record');
  // 40,000 rows fill about 400 heap pages; the 5 claimable ones sit on one or two.
  const blocks = await heapBlocksRead(`SELECT * FROM skiplock.claimable_jobs(10, now(), 29000, '{ours}')`);
  expect(blocks).toBeLessThan(20);
  const wake = await heapBlocksRead(`SELECT skiplock.next_claimable_at('{ours}', 29000)`);
  expect(wake).toBeLessThan(20);
});
