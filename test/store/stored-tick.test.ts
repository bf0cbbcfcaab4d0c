/**
 * The tick's commonest statement stored as a function (migration 026, src/store/stored-tick.ts):
 * its body is completeAndClaim's text, verbatim; only that shape carries the stored form; and a
 * driver that does not prepare statements calls the function, where one that prepares sends the
 * text. test/store/driver-contract.test.ts runs the tick's writes and claims over Neon's HTTP and
 * WebSocket drivers, which send the stored form, against the same checks as over pg.
 */
import { afterAll, beforeAll, expect, test } from 'vitest';
import { completeAndClaim, type CompleteAndClaimParams } from '../../src/store/claim.ts';
import { startNeonProxy } from '../../src/dev/neon-proxy.ts';
import { createNeonHttpDriver } from '../../src/store/drivers/neon-http.ts';
import { createPgDriver } from '../../src/store/drivers/pg.ts';
import { insertJobs } from '../../src/store/enqueue.ts';
import { statement } from '../../src/store/sql.ts';
import { STORED_TICK, storedTickBody, storedTickMigration } from '../../src/store/stored-tick.ts';
import { createTestDb, type TestDb } from '../support/db.ts';

let db: TestDb;
beforeAll(async () => (db = await createTestDb()));
afterAll(() => db?.drop());

const plain: CompleteAndClaimParams = { now: null, workerId: 'w', results: [], limit: 5, budgetMs: 60_000, tasks: ['noop'], leaseMs: 30_000, leaseGraceMs: 5_000, staticSchedules: null };

test("the function's body is completeAndClaim's text for the shape (else: a migration that creates it again)", async () => {
  const text = completeAndClaim(plain).text;
  const [row] = await db.sql.query<{ body: string }>(statement(`SELECT prosrc AS body FROM pg_proc WHERE oid = $1::regprocedure`, [`${STORED_TICK.name}(${STORED_TICK.parameters.join(', ')})`]));
  const hint = `completeAndClaim's text for the stored shape changed: add a migration with\n\n${storedTickMigration(text, 'skiplock.tick_answer')}`;
  expect(row?.body, hint).toBe(storedTickBody(text));
});

test('only the write of DONE results with the plain claim and no probe has a stored form', () => {
  const done = { id: '1', attempt: 1, status: 'DONE' as const, result: null, error: null, delay_ms: 0, release: false };
  expect(completeAndClaim(plain).stored?.values).toEqual(completeAndClaim(plain).values);
  expect(completeAndClaim({ ...plain, results: [done] }).stored).toBeDefined();
  expect(completeAndClaim({ ...plain, results: [{ ...done, status: 'QUEUED' }] }).stored).toBeUndefined();
  expect(completeAndClaim({ ...plain, probeLeases: true }).stored).toBeUndefined();
  expect(completeAndClaim({ ...plain, fanIn: true }).stored).toBeUndefined();
  expect(completeAndClaim({ ...plain, flowLimits: [{ task: 'limited', concurrency: 1 } as never] }).stored).toBeUndefined();
  expect(completeAndClaim({ ...plain, batches: [{ task: 'b' } as never] }).stored).toBeUndefined();
});

test.each(['pg without prepared statements', 'neon-http'])('a driver that does not prepare statements (%s) calls the function; one that prepares sends the text', async (name) => {
  const proxy = name === 'neon-http' ? await startNeonProxy() : undefined;
  const unprepared = proxy ? createNeonHttpDriver(db.url, { fetchEndpoint: proxy.fetchEndpoint }) : createPgDriver(db.url, { preparedStatements: false });
  const prepared = createPgDriver(db.url);
  try {
    await db.emptyJobs();
    await db.sql.query(insertJobs({ now: null, jobs: Array.from({ length: 4 }, (_, i) => ({ task: 'noop', payload: { i }, priority: 0, run_at: null, delay_ms: 0, max_attempts: 5, timeout_ms: 10_000, idempotency_key: null, schedule_name: null, scheduled_for: null })) }));
    const claimed = (await unprepared.query(completeAndClaim({ ...plain, limit: 2 }))).filter((r) => r.id !== null);
    expect(claimed.map((r) => r.payload)).toEqual([{ i: 0 }, { i: 1 }]);
    // Without the function, only the driver that calls it fails; the text still runs.
    await db.sql.query(statement(`ALTER FUNCTION ${STORED_TICK.name}(${STORED_TICK.parameters.join(', ')}) RENAME TO tick_done_claim_away`));
    await expect(unprepared.query(completeAndClaim({ ...plain, limit: 1 }))).rejects.toThrow(/tick_done_claim/);
    expect((await prepared.query(completeAndClaim({ ...plain, limit: 1 }))).filter((r) => r.id !== null)).toHaveLength(1);
  } finally {
    await db.sql.query(statement(`ALTER FUNCTION skiplock.tick_done_claim_away(${STORED_TICK.parameters.join(', ')}) RENAME TO tick_done_claim`)).catch(() => {});
    await Promise.all([unprepared.close(), prepared.close(), proxy?.close()]);
  }
});
