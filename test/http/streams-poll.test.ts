/**
 * Serving streams without a statement per reader per poll (src/runtime/streams/hub.ts): the
 * readers of one job's stream in a process share one poll, which backs off while the stream is
 * silent. Counted, never timed: the stream reads (readChunks statements) the app sends while 100
 * readers follow one job, and per open stream over 10 s while the job is silent and while it
 * writes — the figures of docs/streams.md ("What an open stream costs"). SKIPLOCK_FIGURES=1 prints them.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { createApp } from '../../src/http/app.ts';
import { createSkiplock } from '../../src/index.ts';
import { exampleTasks } from '../../src/tasks/examples.ts';
import { createTestDb, type TestDb } from '../support/db.ts';
import { API_TOKEN } from './helpers.ts';
import { clock, countingReads, events, gate, sleep, talk } from './streams-support.ts';

let db: TestDb;
beforeAll(async () => (db = await createTestDb()));
afterAll(() => db.drop());

const figures = (line: string) => process.env.SKIPLOCK_FIGURES && console.info(`[figures] ${line}`);

/** An app over a skiplock whose stream reads are counted. */
function counted(connectionMs = 60_000) {
  const counting = countingReads(db.sql);
  const skiplock = createSkiplock({ sql: counting.sql, tasks: [...exampleTasks, talk, clock], log: () => {} });
  const app = createApp({ skiplock, apiToken: API_TOKEN, streamConnectionMs: connectionMs });
  const open = async (jobId: string, query = '') => events(await app.request(`/v1/jobs/${jobId}/stream${query}`, { headers: { authorization: `Bearer ${API_TOKEN}` } }));
  return { skiplock, reads: counting.reads, open };
}

describe('one poll per stream, whatever the readers', () => {
  test('100 concurrent readers of one running job: one poll (the reads of one reader), and every reader gets every chunk then end', async () => {
    const g = `hundred-${Math.random()}`;
    const s = counted();
    const job = await s.skiplock.enqueue({ task: 'talk', payload: { before: 1, after: 5, gate: g } } as never);
    const ticking = s.skiplock.tick({ untilIdle: true });
    // The job's first chunk is stored (a flush within 100 ms) before the readers come.
    while ((await s.skiplock.readStream(job.id)).chunks.length === 0) await sleep(20);
    const before = s.reads();
    const readers = await Promise.all(Array.from({ length: 100 }, () => s.open(job.id)));
    const firsts = await Promise.all(readers.map((r) => r.next()));
    expect(firsts.every((f) => f.value?.id === '1')).toBe(true);
    const atConnect = s.reads() - before;
    await sleep(3000); // silent: the shared poll backs off (0.2, 0.4, 0.8, 1.6 s)
    const silent = s.reads() - before - atConnect;
    gate(g).open();
    const rest = await Promise.all(
      readers.map(async (r) => {
        const ids: string[] = [];
        for await (const e of r) ids.push(e.event === 'end' ? 'end' : e.id!);
        return ids.join(',');
      }),
    );
    await ticking;
    const total = s.reads() - before;
    figures(`100 readers of one job: ${atConnect} read(s) at connect, ${silent} in 3 s silent, ${total} in all`);
    expect(new Set(rest)).toEqual(new Set(['2,3,4,5,6,end']));
    expect(atConnect).toBe(1);
    expect(silent).toBeLessThanOrEqual(6);
    expect(total).toBeLessThanOrEqual(15);
  });

  test('a reader behind what the hub keeps reads its own pages, and still nothing twice', async () => {
    const s = counted();
    const job = await s.skiplock.enqueue({ task: 'talk', payload: { before: 1200 } } as never);
    await s.skiplock.tick({ untilIdle: true });
    // The first reader starts at 1190: the hub keeps 1191…1200; the second starts at 0, behind it.
    const late = await s.open(job.id, '?after=1190');
    const early = await s.open(job.id);
    const ids = async (it: AsyncGenerator<{ event: string; id: string | undefined }>) => {
      const out: number[] = [];
      for await (const e of it) if (e.event === 'message') out.push(Number(e.id));
      return out;
    };
    const [a, b] = await Promise.all([ids(late), ids(early)]);
    expect(a).toEqual(Array.from({ length: 10 }, (_, i) => 1191 + i));
    expect(b).toEqual(Array.from({ length: 1200 }, (_, i) => i + 1));
  });
});

describe('what an open stream costs (statements over 10 s)', () => {
  test('one reader: silent job, and a job writing a chunk every 50 ms', async () => {
    const silentApp = counted();
    const busyApp = counted();
    const g = `cost-${Math.random()}`;
    const silentJob = await silentApp.skiplock.enqueue({ task: 'talk', payload: { before: 1, gate: g } } as never);
    const silentTick = silentApp.skiplock.tick({ untilIdle: true });
    while ((await silentApp.skiplock.readStream(silentJob.id)).chunks.length === 0) await sleep(20);
    const busyJob = await busyApp.skiplock.enqueue({ task: 'talk', payload: { before: 200, everyMs: 50 } } as never);
    const busyTick = busyApp.skiplock.tick({ untilIdle: true });
    const [silentReader, busyReader] = await Promise.all([silentApp.open(silentJob.id), busyApp.open(busyJob.id)]);
    const silentFrom = silentApp.reads();
    const busyFrom = busyApp.reads();
    const follow = async (it: AsyncGenerator<{ event: string }>, ms: number) => {
      const until = performance.now() + ms;
      let n = 0;
      for await (const e of it) if (e.event === 'message' && ++n && performance.now() > until) break;
      return n;
    };
    const [busyChunks] = await Promise.all([follow(busyReader, 10_000), silentReader.next(), sleep(10_000)]);
    const silent = silentApp.reads() - silentFrom;
    const busy = busyApp.reads() - busyFrom;
    gate(g).open();
    await Promise.all([silentTick, busyTick, silentReader.return(undefined)]);
    figures(`per open stream over 10 s: silent ${silent} statements, writing (a chunk every 50 ms, ${busyChunks} chunks read) ${busy}`);
    // Silent: 0.2 + 0.4 + 0.8 + 1.6 s, then every 2 s.
    expect(silent).toBeLessThanOrEqual(9);
    // Writing: at most one poll per 100 ms, whatever the readers (one here).
    expect(busy).toBeLessThanOrEqual(101);
    expect(busyChunks).toBeGreaterThan(50);
  });
});

describe('write → reader latency (printed with SKIPLOCK_FIGURES=1, not asserted)', () => {
  test('a chunk every 50 ms for 3 s, read over SSE in this process', async () => {
    const s = counted();
    const job = await s.skiplock.enqueue({ task: 'clock', payload: { n: 60, everyMs: 50 } } as never);
    const ticking = s.skiplock.tick({ untilIdle: true });
    const reader = await s.open(job.id);
    const latencies: number[] = [];
    for await (const e of reader) if (e.event === 'message') latencies.push(Date.now() - (JSON.parse(e.data) as { t: number }).t);
    await ticking;
    expect(latencies).toHaveLength(60);
    const sorted = [...latencies].sort((a, b) => a - b);
    const at = (p: number) => sorted[Math.min(sorted.length - 1, Math.ceil(p * sorted.length) - 1)];
    figures(`write → SSE reader latency: p50 ${at(0.5)} ms, p99 ${at(0.99)} ms, max ${sorted.at(-1)} ms (n=${sorted.length})`);
  });
});
