/**
 * Migration 021 (issue 33 item 3) moves an existing database to the queue + record model: a
 * million jobs of every state, migrated by the first of several instances that start ticking at
 * once (autoMigrate), the others' claims waiting for it and going on after it. Every job that was
 * due runs exactly once, none is lost, finished ones keep their results, and an older deployment's
 * statements fail loudly instead of writing rows the new code would not see.
 */
import { afterAll, beforeAll, expect, test } from 'vitest';
import { z } from 'zod';
import { createSkiplock, defineTask } from '../../src/index.ts';
import { migrations } from '../../src/migrations.ts';
import { createPgDriver } from '../../src/store/drivers/pg.ts';
import { migrate } from '../../src/store/migrate.ts';
import { statement, type Sql } from '../../src/store/sql.ts';
import { createTestDb, type TestDb } from '../support/db.ts';

let db: TestDb;
beforeAll(async () => (db = await createTestDb({ migrated: false })));
afterAll(() => db?.drop());

const quiet = () => {};
const DONE = 932_000;
const DUE = 60_000;
const FUTURE = 2_000;
const EXPIRED = 1_000;
const SLEEPERS = 1_000;
const PARENTS = 500;

/** The old table, as migrations 001–020 left it, filled in a few statements. */
async function fillOldTable(sql: Sql) {
  const q = (text: string) => sql.query(statement(text));
  await q(`INSERT INTO skiplock.job (task, payload, status, attempts, finished_at, result, created_at, updated_at, run_at)
           SELECT 'noop', jsonb_build_object('n', g), 'DONE', 1, now() - interval '1 hour', '{"ok":true}', now() - interval '2 hours',
                  now() - interval '1 hour', now() - interval '2 hours' FROM generate_series(1, ${DONE}) g`);
  await q(`INSERT INTO skiplock.job (task, payload, status, attempts, max_attempts, finished_at, last_error)
           SELECT 'noop', '{}', CASE WHEN g % 3 = 0 THEN 'CANCELLED' ELSE 'DEAD' END, 1, 1, now() - interval '1 hour', 'boom'
             FROM generate_series(1, 3000) g`);
  await q(`INSERT INTO skiplock.job (task, payload, run_at) SELECT 'noop', jsonb_build_object('due', g), now() - interval '1 second' FROM generate_series(1, ${DUE}) g`);
  await q(`INSERT INTO skiplock.job (task, payload, run_at) SELECT 'noop', '{"later":true}', now() + interval '1 hour' FROM generate_series(1, ${FUTURE})`);
  // An old worker that vanished: leases expired; the reaper of the new code takes them back.
  await q(`INSERT INTO skiplock.job (task, payload, status, attempts, locked_by, locked_until, started_at)
           SELECT 'noop', '{"lost":true}', 'RUNNING', 1, 'old-worker', now() - interval '1 minute', now() - interval '2 minutes' FROM generate_series(1, ${EXPIRED})`);
  // Workflows asleep under the old model: QUEUED with a sleeping step whose wake has come.
  await q(`WITH j AS (INSERT INTO skiplock.job (task, payload, run_at, step_count) SELECT 'sleeper', '{}', now() - interval '1 second', 1
                      FROM generate_series(1, ${SLEEPERS}) RETURNING id)
           INSERT INTO skiplock.job_step (job_id, id, seq, kind, status, attempts, started_at, wake_at)
           SELECT id, 'nap', 1, 'sleep', 'sleeping', 0, now() - interval '1 hour', now() - interval '1 second' FROM j`);
  // Parents WAITING for a child each (the child is QUEUED, due).
  await q(`WITH p AS (INSERT INTO skiplock.job (task, payload, status, step_count, pending_children)
                      SELECT 'parent', '{}', 'WAITING', 1, 1 FROM generate_series(1, ${PARENTS}) RETURNING id),
                c AS (INSERT INTO skiplock.job (task, payload, parent_id, parent_step) SELECT 'noop', '{"child":true}', id, 'kid' FROM p RETURNING id, parent_id)
           INSERT INTO skiplock.job_step (job_id, id, seq, kind, status, attempts, started_at, child_id, child_task)
           SELECT parent_id, 'kid', 1, 'invoke', 'waiting', 0, now(), id, 'noop' FROM c`);
  await q(`ANALYZE skiplock.job`);
}

test('a million jobs move to the new model while four instances tick: nothing lost, nothing run twice, old statements fail loudly', async () => {
  await migrate(db.sql, migrations.filter((m) => m.id < 21));
  await fillOldTable(db.sql);
  const [{ n: total }] = (await db.sql.query(statement(`SELECT count(*)::int AS n FROM skiplock.job`))) as [{ n: number }];
  expect(total).toBeGreaterThanOrEqual(1_000_000);

  const runs = new Map<string, number>();
  const noop = defineTask({ name: 'noop', payload: z.any(), handler: (_p, ctx) => void runs.set(ctx.job.id, (runs.get(ctx.job.id) ?? 0) + 1) });
  const sleeper = defineTask({ name: 'sleeper', payload: z.any(), handler: async (_p, ctx) => (await ctx.sleep('nap', 1000), 'woke') });
  const parent = defineTask({ name: 'parent', payload: z.any(), handler: async (_p, ctx) => ctx.invoke('kid', 'noop', { child: true }) });
  const drivers = Array.from({ length: 4 }, () => createPgDriver(db.url, { max: 3 }));
  try {
    const instances = drivers.map((sql) => createSkiplock({ sql, tasks: [noop, sleeper, parent], autoMigrate: migrations, log: quiet, retention: false }));
    const started = performance.now();
    // Each instance's first statement migrates (one does the work, the others wait for its lock),
    // then claims: the ticks go on from where the migration left the jobs. A fifth connection
    // migrates too, to time how long the schema change holds everyone back.
    const migrator = createPgDriver(db.url, { max: 1 });
    const migrated = migrate(migrator, migrations).then(() => performance.now() - started).finally(() => migrator.close());
    const ticks = await Promise.all(instances.map((s) => s.tick({ untilIdle: true, concurrency: 100, budgetMs: 600_000 })));
    const elapsed = performance.now() - started;
    console.log(`migration 021 over ${total} rows: done ${Math.round(await migrated)} ms after the ticks started`);
    const claimed = ticks.reduce((a, t) => a + t.claimed, 0);
    expect(claimed).toBeGreaterThanOrEqual(DUE + EXPIRED + SLEEPERS + PARENTS * 2);
    console.log(`migration 021 + draining ${claimed} jobs over ${total} rows: ${Math.round(elapsed)} ms`);

    // No job ran twice; every due one ran.
    expect([...runs.values()].filter((n) => n > 1)).toEqual([]);
    const counts = Object.fromEntries(
      (await db.sql.query<{ status: string; n: number }>(statement(`SELECT status, count(*)::int AS n FROM skiplock.job GROUP BY status`))).map((r) => [r.status, r.n]),
    );
    expect(counts).toEqual({ DONE: DONE + DUE + EXPIRED + SLEEPERS + PARENTS * 2, QUEUED: FUTURE, DEAD: 2000, CANCELLED: 1000 });
    // The queue holds exactly the live jobs; the sleepers woke and returned.
    expect(await db.sql.query(statement(`SELECT count(*)::int AS n FROM skiplock.queue`))).toEqual([{ n: FUTURE }]);
    expect(await db.sql.query(statement(`SELECT count(*)::int AS n FROM skiplock.job WHERE task = 'sleeper' AND result = '"woke"'`))).toEqual([{ n: SLEEPERS }]);
    expect(await db.sql.query(statement(`SELECT count(*)::int AS n FROM skiplock.job WHERE task = 'noop' AND status = 'DONE' AND result = '{"ok":true}'`))).toEqual([{ n: DONE }]);
    // DEAD and CANCELLED are listed by failed_status.
    expect(await db.sql.query(statement(`SELECT count(*)::int AS n FROM skiplock.job_record WHERE failed_status IS NOT NULL`))).toEqual([{ n: 3000 }]);
  } finally {
    await Promise.all(drivers.map((sql) => sql.close()));
  }

  // An older deployment's statements: its claim reads the queue but cannot write the view, so the
  // statement fails whole; its enqueue cannot insert into the view. Nothing is written.
  const oldClaim = `WITH next AS MATERIALIZED (SELECT id FROM skiplock.claimable_jobs(10, now(), 600000, ARRAY['noop']) AS id)
     UPDATE skiplock.job j SET status = 'RUNNING', attempts = j.attempts + 1, locked_by = 'old', locked_until = now() + interval '1 minute'
      WHERE j.id = ANY (ARRAY(SELECT id FROM next)) RETURNING j.id`;
  await db.sql.query(statement(`UPDATE skiplock.queue SET run_at = now() - interval '1 second'`));
  await expect(db.sql.query(statement(oldClaim))).rejects.toThrow(/cannot update view "job"/);
  await expect(db.sql.query(statement(`INSERT INTO skiplock.job (task, payload) VALUES ('noop', '{}')`))).rejects.toThrow(/cannot insert into view "job"/);
  expect(await db.sql.query(statement(`SELECT count(*)::int AS n FROM skiplock.queue WHERE status = 'QUEUED'`))).toEqual([{ n: FUTURE }]);
}, 600_000);
