/**
 * The stream hub (src/runtime/streams/hub.ts) over the real readStream: what it keeps in memory
 * (the last 1000 chunks, about 1 MiB of JSON) serves a reader that arrives later with no
 * statement; a reader behind it reads its own pages; every reader gets every chunk once.
 */
import { afterAll, beforeAll, expect, test } from 'vitest';
import { z } from 'zod';
import { createSkiplock, defineTask } from '../../src/index.ts';
import { createStreamHub, STREAM_POLL, type StreamReader } from '../../src/runtime/streams/index.ts';
import { createTestDb, type TestDb } from '../support/db.ts';

let db: TestDb;
beforeAll(async () => (db = await createTestDb()));
afterAll(() => db.drop());

const writer = defineTask({
  name: 'writer',
  payload: z.object({ n: z.number().int(), size: z.number().int() }),
  handler: async ({ n, size }, ctx) => {
    const out = ctx.stream();
    for (let i = 1; i <= n; i++) out.write(`${i}:`.padEnd(size, 'x'));
  },
});

async function setup(n: number, size: number) {
  const skiplock = createSkiplock({ sql: db.sql, tasks: [writer], log: () => {} });
  const job = await skiplock.enqueue({ task: 'writer', payload: { n, size } });
  await skiplock.tick({ untilIdle: true });
  let reads = 0;
  const hub = createStreamHub({ read: (id, o) => (reads++, skiplock.readStream(id, o)) });
  return { hub, jobId: job.id, reads: () => reads };
}

async function drain(reader: StreamReader): Promise<number[]> {
  const seqs: number[] = [];
  for (;;) {
    const page = await reader.next(1000);
    seqs.push(...page.chunks.map((c) => c.seq));
    if (page.done) return seqs;
  }
}

const range = (n: number) => Array.from({ length: n }, (_, i) => i + 1);

test('small chunks: a second reader from 0, while the first is open, costs no statement', async () => {
  const s = await setup(300, 20);
  const first = s.hub.open(s.jobId);
  expect(await drain(first)).toEqual(range(300));
  const before = s.reads();
  const second = s.hub.open(s.jobId);
  expect(await drain(second)).toEqual(range(300));
  expect(s.reads() - before).toBe(0);
  first.close();
  second.close();
  expect(s.hub.readers()).toBe(0);
});

test('large chunks: the hub keeps about 1 MiB; a reader behind it reads its own pages, each chunk once', async () => {
  const size = 60 * 1024;
  const s = await setup(40, size); // 2.4 MB of JSON
  const first = s.hub.open(s.jobId);
  expect(await drain(first)).toEqual(range(40));
  const before = s.reads();
  const second = s.hub.open(s.jobId);
  expect(await drain(second)).toEqual(range(40));
  const own = s.reads() - before;
  // 40 − ⌊1 MiB / 60 KiB⌋ chunks are behind the window: read by pages of about 1 MiB, then the rest from memory.
  expect(own).toBeGreaterThanOrEqual(1);
  expect(own).toBeLessThanOrEqual(3);
  expect(Math.floor(STREAM_POLL.windowBytes / size)).toBeLessThan(40);
  first.close();
  second.close();
});
