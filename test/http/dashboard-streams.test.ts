/**
 * The job page's streams (src/http/dashboard/pages/job-streams.ts): each stream a job wrote,
 * server-rendered from readStream (so the page shows what is stored without JavaScript), its
 * chunks escaped; while the stream can still grow, a live view (EventSource on the job's stream
 * route with a read token minted for that job, allowed by the page's CSP).
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import * as z from 'zod';
import { defineTask, type TaskContext } from '../../src/index.ts';
import { statement } from '../../src/store/sql.ts';
import { streamNames } from '../../src/store/stream-names.ts';
import { exampleTasks } from '../../src/tasks/examples.ts';
import { getPage, logIn } from './dashboard-support.ts';
import { createTestApp, type TestApp } from './helpers.ts';

const XSS = '<img src=x onerror=alert(1)>';

/** Writes `chunks` to the streams they name, then returns (or holds RUNNING while `hold` is set). */
const writes = defineTask({
  name: 'writes',
  payload: z.object({ chunks: z.array(z.object({ stream: z.string().optional(), data: z.unknown() })) }),
  handler: async ({ chunks }, ctx: TaskContext) => {
    for (const c of chunks) ctx.stream(c.stream).write(c.data);
    return { written: chunks.length };
  },
});

/** Writes two chunks, stores them (close), then stays RUNNING until `release()`. */
let release = () => {};
const holds = defineTask({
  name: 'holds',
  payload: z.object({}),
  handler: async (_p, ctx: TaskContext) => {
    const out = ctx.stream();
    out.write('first ');
    out.write(XSS);
    await out.close();
    await new Promise<void>((resolve) => (release = resolve));
    return {};
  },
});

let t: TestApp;
let cookie: string;
beforeAll(async () => {
  t = await createTestApp({ tasks: [...exampleTasks, writes, holds], skiplock: { streamTokens: { secret: 'dashboard-stream-secret-0123' } } });
  cookie = await logIn(t);
});
afterAll(() => t.close());

async function run(chunks: { stream?: string; data: unknown }[]): Promise<string> {
  const job = await t.skiplock.enqueue({ task: 'writes', payload: { chunks } } as never);
  await t.skiplock.tick({ untilIdle: true, budgetMs: 20_000, pollIntervalMs: 10 });
  expect((await t.skiplock.getJob(job.id))?.status).toBe('DONE');
  return job.id;
}

describe('streamNames (src/store/stream-names.ts)', () => {
  test("a job's stream names in order, with their chunk counts and last seq; none for a job without chunks", async () => {
    const id = await run([{ data: 'a' }, { stream: 'progress', data: { pct: 50 } }, { data: 'b' }, { stream: 'logs', data: 'x' }]);
    const rows = await t.skiplock.sql.query(streamNames({ jobId: id }));
    expect(rows.map((r) => ({ stream: r.stream, chunks: Number(r.chunks), last: Number(r.last_seq) }))).toEqual([
      { stream: 'default', chunks: 2, last: 2 },
      { stream: 'logs', chunks: 1, last: 1 },
      { stream: 'progress', chunks: 1, last: 1 },
    ]);
    const other = await run([]);
    expect(await t.skiplock.sql.query(streamNames({ jobId: other }))).toEqual([]);
  });
});

describe('the job page', () => {
  test("shows each stream's stored chunks server-rendered: strings as text, JSON one a line, escaped", async () => {
    const id = await run([{ data: 'Hello, ' }, { data: 'world.' }, { data: XSS }, { stream: 'progress', data: { pct: 50, note: XSS } }]);
    const html = await (await getPage(t, `/jobs/${id}`, cookie)).text();
    expect(html).toContain('<h2>Streams</h2>');
    expect(html).toMatch(/data-stream="default"[\s\S]*Hello, world\.&lt;img src=x onerror=alert\(1\)&gt;/);
    expect(html).toContain('data-stream="progress"');
    expect(html).toContain('{&quot;pct&quot;:50,&quot;note&quot;:&quot;&lt;img src=x onerror=alert(1)&gt;&quot;}');
    expect(html).not.toContain(XSS);
    // Finished and read to its end: nothing live, no token handed out.
    expect(html).not.toContain('data-stream-src="');
    expect(html).toContain('3 chunks');
  });

  test('a job that wrote no stream has no Streams section', async () => {
    const id = await run([]);
    expect(await (await getPage(t, `/jobs/${id}`, cookie)).text()).not.toContain('<h2>Streams</h2>');
  });

  test("a long stream shows its last chunks and says how many came before", async () => {
    const id = await run(Array.from({ length: 600 }, (_, i) => ({ data: `line ${i + 1}\n` })));
    const html = await (await getPage(t, `/jobs/${id}`, cookie)).text();
    expect(html).toContain('line 600');
    expect(html).toContain('line 101\n');
    expect(html).not.toContain('line 100\n');
    expect(html).toContain('100 earlier chunks not shown');
  });
});

describe('the live view', () => {
  test("a stream that can still grow gets a live source: its route after the last chunk shown, with this job's read token; the CSP lets the page connect to it", async () => {
    const job = await t.skiplock.enqueue({ task: 'holds', payload: {} } as never);
    const ticking = t.skiplock.tick({ untilIdle: true, budgetMs: 20_000, pollIntervalMs: 10 });
    try {
      for (let i = 0; i < 200; i++) {
        const [row] = await t.skiplock.sql.query(statement(`SELECT count(*)::int AS n FROM skiplock.job_stream_chunk WHERE job_id = $1`, [job.id]));
        if (Number(row!.n) === 2) break;
        await new Promise((resolve) => setTimeout(resolve, 25));
      }
      const res = await getPage(t, `/jobs/${job.id}`, cookie);
      expect(res.headers.get('content-security-policy')).toContain("connect-src 'self'");
      const html = await res.text();
      expect(html).toContain('first &lt;img src=x onerror=alert(1)&gt;');
      const src = /data-stream-src="([^"]+)"/.exec(html)?.[1]?.replaceAll('&amp;', '&');
      expect(src).toBeDefined();
      const url = new URL(src!, 'http://skiplock.test');
      expect(url.pathname).toBe(`/v1/jobs/${job.id}/stream`);
      expect(url.searchParams.get('after')).toBe('2');
      expect(url.searchParams.get('name')).toBe('default');
      // The token reads this job's stream without the API token, and nothing else.
      const read = await t.call('GET', `${url.pathname}${url.search}`, { token: null });
      expect(read.status).toBe(200);
      expect(read.headers.get('content-type')).toMatch(/^text\/event-stream/);
      await read.body?.cancel();
      expect((await t.call('GET', `/v1/jobs/${job.id}?token=${url.searchParams.get('token')}`, { token: null })).status).toBe(401);
    } finally {
      release();
      await ticking;
    }
  });
});
