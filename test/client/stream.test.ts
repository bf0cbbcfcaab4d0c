/**
 * The client's streamJob (src/client/stream.ts): an async iterator of a job's chunks over
 * GET /v1/jobs/{id}/stream that reconnects and resumes by itself — every chunk exactly once, in
 * order, across connections the server cuts (its connection life set to ~1 s) — ends at `end`,
 * stops on abort, and throws the API's refusals.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { createClient, SkiplockApiError, type SkiplockClient } from '../../src/client/index.ts';
import { createApp } from '../../src/http/app.ts';
import { exampleTasks } from '../../src/tasks/examples.ts';
import { API_TOKEN, createTestApp, type TestApp } from '../http/helpers.ts';
import { chunkAt, gate, talk } from '../http/streams-support.ts';

let t: TestApp;
let client: SkiplockClient;
let requests: Request[] = [];
beforeAll(async () => {
  t = await createTestApp({ tasks: [...exampleTasks, talk], skiplock: { streamTokens: { secret: 'client-stream-secret-0123' } } });
  // The server cuts every stream's connection after ~1 s (as a platform's request limit would).
  const app = createApp({ skiplock: t.skiplock, apiToken: API_TOKEN, streamConnectionMs: 1000 });
  client = createClient({
    url: 'http://skiplock.test',
    token: API_TOKEN,
    fetch: async (request) => {
      requests.push(request.clone());
      return app.fetch(request);
    },
  });
});
afterAll(() => t.close());

const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i);

describe('streamJob', () => {
  test('across connections cut every ~1 s while the job writes: every chunk exactly once, in order, then it ends', async () => {
    const job = await t.skiplock.enqueue({ task: 'talk', payload: { before: 30, everyMs: 100 } } as never);
    const ticking = t.skiplock.tick({ untilIdle: true });
    requests = [];
    const seen: { seq: number; data: unknown }[] = [];
    for await (const chunk of client.streamJob(job.id)) seen.push(chunk);
    await ticking;
    expect(seen.map((c) => c.seq)).toEqual(range(1, 30));
    expect(seen.map((c) => c.data)).toEqual(range(1, 30).map(chunkAt));
    // ≈ 3 s of writing over ~1 s connections: it reconnected, each time after the last seq it yielded.
    expect(requests.length).toBeGreaterThanOrEqual(3);
    const afters = requests.map((r) => Number(new URL(r.url).searchParams.get('after') ?? 0));
    expect(afters).toEqual([...afters].sort((a, b) => a - b));
    expect(requests.every((r) => r.headers.get('authorization') === `Bearer ${API_TOKEN}`)).toBe(true);
  });

  test('after: resumes after that seq; name: another stream; a finished job ends after its chunks', async () => {
    const job = await t.skiplock.enqueue({ task: 'talk', payload: { before: 8 } } as never);
    await t.skiplock.tick({ untilIdle: true });
    const seqs: number[] = [];
    for await (const chunk of client.streamJob(job.id, { after: 5 })) seqs.push(chunk.seq);
    expect(seqs).toEqual([6, 7, 8]);
    const other: number[] = [];
    for await (const chunk of client.streamJob(job.id, { name: 'nothing-here' })) other.push(chunk.seq);
    expect(other).toEqual([]);
  });

  test('abort stops it: the iterator ends, and no request follows', async () => {
    const g = `abort-${Math.random()}`;
    const job = await t.skiplock.enqueue({ task: 'talk', payload: { before: 2, after: 1, gate: g } } as never);
    const ticking = t.skiplock.tick({ untilIdle: true });
    const controller = new AbortController();
    const seqs: number[] = [];
    for await (const chunk of client.streamJob(job.id, { signal: controller.signal })) {
      seqs.push(chunk.seq);
      if (chunk.seq === 2) controller.abort();
    }
    expect(seqs).toEqual([1, 2]);
    const count = requests.length;
    await new Promise((resolve) => setTimeout(resolve, 1500));
    expect(requests.length).toBe(count);
    gate(g).open();
    await ticking;
  });

  test('a stream token instead of the API token (a browser)', async () => {
    const job = await t.skiplock.enqueue({ task: 'talk', payload: { before: 3 } } as never);
    await t.skiplock.tick({ untilIdle: true });
    const token = await t.skiplock.streamToken(job.id);
    const seqs: number[] = [];
    for await (const chunk of client.streamJob(job.id, { token })) seqs.push(chunk.seq);
    expect(seqs).toEqual([1, 2, 3]);
    expect(requests.at(-1)!.headers.get('authorization')).toBeNull();
    expect(new URL(requests.at(-1)!.url).searchParams.get('token')).toBe(token);
  });

  test('refusals are thrown as SkiplockApiError: no such job, a bad name, a wrong token', async () => {
    const first = async (it: AsyncIterable<unknown>) => {
      for await (const c of it) return c;
      return undefined;
    };
    await expect(first(client.streamJob('999999999'))).rejects.toMatchObject({ code: 'not_found', status: 404 });
    await expect(first(client.streamJob('1', { name: 'bad name' }))).rejects.toBeInstanceOf(SkiplockApiError);
    await expect(first(client.streamJob('1', { token: 'forged' }))).rejects.toMatchObject({ code: 'unauthorized' });
  });
});
