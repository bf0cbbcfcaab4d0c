/**
 * The claim returns a narrow answer (issue 23: CLAIMED_COLUMNS, times as epoch milliseconds), not
 * the job's row; what a handler gets as ctx.job must still be the row the claim left, field for
 * field, to the millisecond, over every driver.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { startNeonProxy, type NeonProxy } from '../../src/dev/neon-proxy.ts';
import { createNeonHttpDriver } from '../../src/store/drivers/neon-http.ts';
import { createPgDriver } from '../../src/store/drivers/pg.ts';
import { completeAndClaim, getJob, insertJobs, type NewJobRow } from '../../src/store/jobs.ts';
import { mapClaimedJob, mapJob } from '../../src/store/rows.ts';
import { statement, type Sql } from '../../src/store/sql.ts';
import { createTestDb, type TestDb } from '../support/db.ts';

let proxy: NeonProxy;
beforeAll(async () => (proxy = await startNeonProxy()));
afterAll(() => proxy.close());

const drivers: Record<string, (url: string) => Sql> = {
  pg: (url) => createPgDriver(url),
  'neon-http': (url) => createNeonHttpDriver(url, { fetchEndpoint: proxy.fetchEndpoint }),
};

const job = (over: Partial<NewJobRow>): NewJobRow => ({
  task: 'noop', payload: {}, priority: 0, run_at: null, delay_ms: 0, max_attempts: 5, timeout_ms: 10_000,
  idempotency_key: null, schedule_name: null, scheduled_for: null, ...over,
});

describe.each(Object.keys(drivers))('driver %s', (name) => {
  let db: TestDb;
  let sql: Sql;
  beforeAll(async () => {
    db = await createTestDb();
    sql = drivers[name]!(db.url);
  });
  afterAll(async () => {
    await sql.close();
    await db.drop();
  });

  const claim = (workerId: string, results: Parameters<typeof completeAndClaim>[0]['results'] = []) =>
    sql.query(completeAndClaim({ now: null, workerId, results, limit: 10, budgetMs: 60_000, leaseMs: 30_000, leaseGraceMs: 5_000, tasks: ['noop'] }));

  test('each claimed job maps to the Job its row holds after the claim', async () => {
    await sql.query(insertJobs({
      now: null,
      jobs: [
        job({ payload: { n: 1, text: 'ü ✓' }, priority: 5, idempotency_key: 'key-1', traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01' }),
        // Microseconds that a float would round up: the Date must truncate them, as the text does.
        job({ payload: 'µs', run_at: '2026-01-01T00:00:00.999999Z' }),
        job({ payload: 'x', schedule_name: 'nightly', scheduled_for: '2026-02-03T04:05:06.789Z', max_attempts: 3, timeout_ms: 1_234 }),
        job({ payload: ['retried'] }),
      ],
    }));
    const first = (await claim('w#1')).filter((r) => r.id !== null);
    expect(first).toHaveLength(4);
    const checkAgainstTable = async (row: Record<string, unknown>, token: string) => {
      const [stored] = await sql.query(getJob({ id: String(row.id) }));
      expect(mapClaimedJob(row, token)).toEqual(mapJob(stored!));
    };
    for (const row of first) await checkAgainstTable(row, 'w#1');
    expect(mapClaimedJob(first.find((r) => r.payload === 'µs')!, 'w#1').runAt.toISOString()).toBe('2026-01-01T00:00:00.999Z');

    // One fails its attempt: claimed again, it carries a history and a last error.
    const failed = first.find((r) => Array.isArray(r.payload))!;
    await claim('w#2', [{ id: String(failed.id), attempt: Number(failed.attempts), status: 'QUEUED', result: null, error: 'boom', delay_ms: 0, release: false, locked_by: 'w#1' }]);
    const [again] = (await claim('w#3')).filter((r) => r.id !== null);
    expect(again?.id).toEqual(failed.id);
    await checkAgainstTable(again!, 'w#3');
    const retried = mapClaimedJob(again!, 'w#3');
    expect(retried.history).toHaveLength(1);
    expect(retried.lastError).toBe('boom');
    expect(retried.attempts).toBe(2);
  });
});
