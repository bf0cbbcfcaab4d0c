/**
 * Streams, the read side and retention (src/runtime/streams/read.ts, src/store/streams.ts):
 * readStream's pages (after, name, limit, the byte cap, done), its refusals, a job's chunks
 * deleted with it by the bulk delete and by retention's prune, and the flush and the read over
 * Neon's HTTP driver (through the local Neon proxy).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'vitest';
import { z } from 'zod';
import { startNeonProxy, type NeonProxy } from '../../src/dev/neon-proxy.ts';
import { createSkiplock, defineTask, type Task, type TaskContext } from '../../src/index.ts';
import { STREAM_READ_LIMITS } from '../../src/runtime/streams/index.ts';
import { createNeonHttpDriver } from '../../src/store/drivers/neon-http.ts';
import { statement, type Sql } from '../../src/store/sql.ts';
import { createTestDb, type TestDb } from '../support/db.ts';

let db: TestDb;
beforeAll(async () => (db = await createTestDb()));
afterAll(() => db.drop());
beforeEach(() => db.emptyJobs('skiplock.job_stream_chunk'));

const quiet = () => {};
const count = async (jobId: string) => Number((await db.sql.query(statement(`SELECT count(*)::int AS n FROM skiplock.job_stream_chunk WHERE job_id = $1`, [jobId])))[0]!.n);

function task(name: string, handler: (ctx: TaskContext) => unknown): Task {
  return defineTask({ name, payload: z.object({}).passthrough(), maxAttempts: 1, handler: (_p, ctx) => handler(ctx) });
}

/** A job that wrote `n` chunks to 'default' (numbers 1…n) and 2 to 'log', run to DONE. */
async function finishedJob(sql: Sql = db.sql, n = 5, over: { name?: string; chunk?: (i: number) => unknown } = {}) {
  const t = task(over.name ?? 'writer', (ctx) => {
    const out = ctx.stream();
    for (let i = 1; i <= n; i++) out.write(over.chunk ? over.chunk(i) : i);
    ctx.stream('log').write('l1');
    ctx.stream('log').write({ line: 'l2 — ünïcødé 🚀' });
    return 'ok';
  });
  const skiplock = createSkiplock({ sql, tasks: [t], log: quiet });
  const job = await skiplock.enqueue({ task: t.name, payload: {} } as never);
  await skiplock.tick({ untilIdle: true });
  return { skiplock, job };
}

describe('readStream', () => {
  test('pages after a seq, by name; done once the job is finished and the page holds the last chunk', async () => {
    const { skiplock, job } = await finishedJob(db.sql, 5);
    const all = await skiplock.readStream(job.id);
    expect(all.done).toBe(true);
    expect(all.chunks.map((c) => [c.seq, c.data])).toEqual([[1, 1], [2, 2], [3, 3], [4, 4], [5, 5]]);
    expect(all.chunks[0]!.at).toBeInstanceOf(Date);
    expect(await skiplock.readStream(job.id, { after: 3 })).toMatchObject({ chunks: [{ seq: 4, data: 4 }, { seq: 5, data: 5 }], done: true });
    expect(await skiplock.readStream(job.id, { after: 5 })).toEqual({ chunks: [], done: true });
    const page = await skiplock.readStream(job.id, { limit: 2 });
    expect(page.chunks.map((c) => c.seq)).toEqual([1, 2]);
    expect(page.done).toBe(false); // more after it
    expect(await skiplock.readStream(job.id, { after: 3, limit: 2 })).toMatchObject({ done: true });
    expect((await skiplock.readStream(job.id, { name: 'log' })).chunks.map((c) => c.data)).toEqual(['l1', { line: 'l2 — ünïcødé 🚀' }]);
    expect(await skiplock.readStream(job.id, { name: 'nothing-here' })).toEqual({ chunks: [], done: true });
  });

  test('a job not finished is not done, even with nothing after', async () => {
    const skiplock = createSkiplock({ sql: db.sql, tasks: [task('queued', () => null)], log: quiet });
    const job = await skiplock.enqueue({ task: 'queued', payload: {} } as never);
    expect(await skiplock.readStream(job.id)).toEqual({ chunks: [], done: false });
  });

  test('a page stops near 1 MiB of JSON (at least one chunk), and is not done then', async () => {
    const big = 'x'.repeat(60 * 1024);
    const { skiplock, job } = await finishedJob(db.sql, 40, { name: 'big', chunk: (i) => `${i}${big}` });
    const first = await skiplock.readStream(job.id, { limit: 1000 });
    const bytes = first.chunks.reduce((sum, c) => sum + JSON.stringify(c.data).length, 0);
    expect(first.chunks.length).toBeGreaterThan(10);
    expect(first.chunks.length).toBeLessThan(40);
    expect(bytes - JSON.stringify(first.chunks.at(-1)!.data).length).toBeLessThan(STREAM_READ_LIMITS.maxBytes);
    expect(first.done).toBe(false);
    const seqs = first.chunks.map((c) => c.seq);
    for (let page = first, pages = 1; !page.done && pages < 10; pages++) {
      page = await skiplock.readStream(job.id, { after: seqs.at(-1)!, limit: 1000 });
      seqs.push(...page.chunks.map((c) => c.seq));
    }
    expect(seqs).toEqual(Array.from({ length: 40 }, (_, i) => i + 1));
  });

  test('bad input is invalid_request, an unknown job not_found; nothing is written', async () => {
    const skiplock = createSkiplock({ sql: db.sql, tasks: [], log: quiet });
    for (const [id, options] of [
      ['abc', {}], ['0', {}], ['99999999999999999999', {}], [42, {}],
      ['1', { after: -1 }], ['1', { after: 1.5 }], ['1', { name: 'has space' }], ['1', { name: '' }], ['1', { limit: 0 }],
      ['1', { limit: STREAM_READ_LIMITS.maxLimit + 1 }], ['1', { other: true }], ['1', 'not options'],
    ] as const)
      await expect(skiplock.readStream(id as never, options as never), JSON.stringify([id, options])).rejects.toMatchObject({ name: 'SkiplockError', code: 'invalid_request' });
    await expect(skiplock.readStream('123456789')).rejects.toMatchObject({ code: 'not_found' });
  });
});

describe("a job's chunks go with it", () => {
  test('the bulk delete deletes the chunks of the jobs it deletes, and only theirs', async () => {
    const { skiplock, job } = await finishedJob(db.sql, 5, { name: 'doomed' });
    const kept = await finishedJob(db.sql, 3);
    expect(await count(job.id)).toBe(7);
    expect(await skiplock.bulk({ action: 'delete', where: { task: 'doomed' } })).toMatchObject({ changed: 1 });
    expect(await count(job.id)).toBe(0);
    expect(await count(kept.job.id)).toBe(5);
  });

  test("retention's prune deletes the chunks of the jobs it deletes", async () => {
    const { skiplock, job } = await finishedJob(db.sql, 5);
    const queued = await skiplock.enqueue({ task: 'writer', payload: {} } as never);
    await db.sql.query(statement(`UPDATE skiplock.job SET finished_at = now() - interval '30 days' WHERE id = $1`, [job.id]));
    expect(await skiplock.prune({ doneMs: 24 * 3600 * 1000 })).toBe(1);
    expect(await count(job.id)).toBe(0);
    expect(await skiplock.getJob(queued.id)).toBeDefined();
  });

  test('every statement in src/store that deletes jobs deletes their chunks too (no foreign key does it)', () => {
    const dir = fileURLToPath(new URL('../../src/store/', import.meta.url));
    const deleting = readdirSync(dir).filter((f) => f.endsWith('.ts') && f !== 'migrations-data.ts')
      // The record (skiplock.job_record, migration 021) is what a job's delete removes.
      .filter((f) => /DELETE FROM skiplock\.job(?:_record)?\s+[a-z]/.test(readFileSync(dir + f, 'utf8')));
    expect(deleting.sort()).toEqual(['bulk.ts', 'retention.ts']);
    for (const f of deleting) expect(readFileSync(dir + f, 'utf8'), f).toContain('deleteChunksCte(');
  });
});

describe('over Neon HTTP', () => {
  let proxy: NeonProxy;
  let neon: Sql;
  beforeAll(async () => {
    proxy = await startNeonProxy();
    neon = createNeonHttpDriver(db.url, { fetchEndpoint: proxy.fetchEndpoint });
  });
  afterAll(async () => {
    await neon.close();
    await proxy.close();
  });

  test('a run flushes its chunks and readStream reads them, over the HTTP driver', async () => {
    const { skiplock, job } = await finishedJob(neon, 150, { name: 'neon-writer', chunk: (i) => (i % 3 === 0 ? `s${i} “quoted” \\ ${'é'.repeat(i % 5)}` : { i, ok: true }) });
    expect((await skiplock.getJob(job.id))!.status).toBe('DONE');
    const read = await skiplock.readStream(job.id, { limit: 1000 });
    expect(read.done).toBe(true);
    expect(read.chunks.map((c) => c.seq)).toEqual(Array.from({ length: 150 }, (_, i) => i + 1));
    expect(read.chunks[2]!.data).toBe(`s3 “quoted” \\ ${'é'.repeat(3)}`);
    expect(read.chunks[3]!.data).toEqual({ i: 4, ok: true });
    expect((await skiplock.readStream(job.id, { name: 'log' })).chunks.map((c) => c.data)).toEqual(['l1', { line: 'l2 — ünïcødé 🚀' }]);
  });
});
