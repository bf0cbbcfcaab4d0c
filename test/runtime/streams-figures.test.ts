/**
 * The figures of docs/streams.md ("When a chunk is stored", "Retention"), printed, not asserted
 * (speed is measured, never tested): flush statements per 100 chunks at three paces, one flush
 * statement's latency over pg and over Neon's HTTP driver (local proxy), and pruning 10,000 jobs
 * with the chunk delete in the statement against an ON DELETE CASCADE foreign key. Skipped in the
 * suite; run: SKIPLOCK_FIGURES=1 npx vitest run test/runtime/streams-figures.test.ts
 */
import { afterAll, beforeAll, test } from 'vitest';
import { z } from 'zod';
import { startNeonProxy } from '../../src/dev/neon-proxy.ts';
import { createSkiplock, defineTask } from '../../src/index.ts';
import { createNeonHttpDriver } from '../../src/store/drivers/neon-http.ts';
import { flushChunks } from '../../src/store/streams.ts';
import { pruneFinishedJobs } from '../../src/store/retention.ts';
import { statement, type Sql, type Statement } from '../../src/store/sql.ts';
import { createTestDb, type TestDb } from '../support/db.ts';

let db: TestDb | undefined;
beforeAll(async () => {
  if (process.env.SKIPLOCK_FIGURES) db = await createTestDb();
});
afterAll(() => db?.drop());
const dbOrThrow = () => db ?? (() => { throw new Error('no database'); })();
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
function counting(sql: Sql) {
  const c = { flushes: 0 };
  const seen = (s: Statement) => { if (s.text.includes('INSERT INTO skiplock.job_stream_chunk')) c.flushes += 1; };
  return { c, sql: { query: (s: Statement) => (seen(s), sql.query(s)), batch: (l: Statement[]) => (l.forEach(seen), sql.batch(l)), close: async () => {} } as Sql };
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const p99 = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length * 0.99)]!;

test.skipIf(!process.env.SKIPLOCK_FIGURES)('the figures of docs/streams.md', async () => {
  const db = dbOrThrow();
  for (const [label, pace] of [['burst', 0], ['1 per 2 ms (tokens)', 2], ['1 per 10 ms', 10]] as const) {
    const k = counting(db.sql);
    const t = defineTask({ name: 't', payload: z.object({}), handler: async (_p, ctx) => { const o = ctx.stream(); for (let i = 0; i < 100; i++) { o.write(`token ${i}`); if (pace) await sleep(pace); } } });
    const s = createSkiplock({ sql: k.sql, tasks: [t], log: () => {} });
    await s.enqueue({ task: 't', payload: {} });
    const t0 = performance.now();
    await s.tick({ untilIdle: true });
    console.log(`FIG 100 chunks ${label}: ${k.c.flushes} flush statements, run ${Math.round(performance.now() - t0)} ms`);
  }
  const proxy = await startNeonProxy();
  const neon = createNeonHttpDriver(db.url, { fetchEndpoint: proxy.fetchEndpoint });
  const s = createSkiplock({ sql: db.sql, tasks: [defineTask({ name: 'x', payload: z.object({}), handler: () => null })], log: () => {} });
  const job = await s.enqueue({ task: 'x', payload: {} });
  await db.sql.query(statement(`UPDATE skiplock.job SET status = 'RUNNING', locked_by = 'w', attempts = 1, locked_until = now() + interval '1 hour' WHERE id = $1`, [job.id]));
  let ord = 0;
  for (const [name, sql] of [['pg', db.sql], ['neon-http (local proxy)', neon]] as const) {
    for (const n of [1, 10, 100]) {
      const times: number[] = [];
      for (let r = 0; r < 60; r++) {
        const chunks = Array.from({ length: n }, () => ({ stream: 'default', segment: 0, ordinal: ++ord, data: `token ${ord} of some text`, bytes: 30 }));
        const t0 = performance.now();
        await sql.query(flushChunks({ now: null, jobId: job.id, lockedBy: 'w', attempt: 1, chunks }));
        times.push(performance.now() - t0);
      }
      console.log(`FIG flush ${n} chunks over ${name}: p50 ${median(times.slice(10)).toFixed(2)} ms, p99 ${p99(times.slice(10)).toFixed(2)} ms (after ~${ord} chunks stored)`);
    }
  }
  await neon.close(); await proxy.close();
  // prune: explicit CTE vs ON DELETE CASCADE
  for (const mode of ['explicit CTE (shipped)', 'FK ON DELETE CASCADE']) {
    await db.emptyJobs('skiplock.job_stream_chunk');
    await db.sql.query(statement(`INSERT INTO skiplock.job (task, payload, status, finished_at, run_at, created_at, updated_at, attempts) SELECT 'x', '{}', 'DONE', now() - interval '30 days', now(), now(), now(), 1 FROM generate_series(1, 10000)`));
    await db.sql.query(statement(`INSERT INTO skiplock.job_stream_chunk (job_id, stream, seq, segment, ordinal, data, bytes) SELECT j.id, 'default', g, 0, g, to_jsonb('c' || g), 4 FROM skiplock.job j, generate_series(1, 5) g WHERE j.id % 10 = 0`));
    await db.sql.query(statement(`VACUUM ANALYZE skiplock.job`)).catch(() => {});
    let text = pruneFinishedJobs({ now: null, doneMs: 86_400_000, cancelledMs: 86_400_000, deadMs: null, limit: 10000 });
    if (mode.startsWith('FK')) {
      await db.sql.query(statement(`ALTER TABLE skiplock.job_stream_chunk ADD CONSTRAINT tmp_fk FOREIGN KEY (job_id) REFERENCES skiplock.job (id) ON DELETE CASCADE`));
      text = { ...text, text: text.text.replace(/,\s*-- Their streams[^\n]*\n\s*deleted_chunks AS \([^\n]*\)/, '') };
    }
    const t0 = performance.now();
    const [row] = await db.sql.query(text);
    console.log(`FIG prune 10k DONE jobs (1k with 5 chunks) — ${mode}: ${Math.round(performance.now() - t0)} ms, deleted ${row!.deleted}, chunks left ${(await db.sql.query(statement('SELECT count(*)::int AS n FROM skiplock.job_stream_chunk')))[0]!.n}`);
    if (mode.startsWith('FK')) await db.sql.query(statement(`ALTER TABLE skiplock.job_stream_chunk DROP CONSTRAINT tmp_fk`));
  }
}, 120_000);
