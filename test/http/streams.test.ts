/**
 * GET /v1/jobs/{id}/stream (src/http/routes/streams.ts): Server-Sent Events in order, resumed
 * with Last-Event-ID (or ?after=) with nothing twice, `end` once the job is finished, a reader
 * that arrives after the end, a reader while the job runs, the connection's bounded life, the
 * heartbeat; auth by bearer or a per-job read token (skiplock.streamToken) and its scoping; bad input.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { exampleTasks } from '../../src/tasks/examples.ts';
import { createApp } from '../../src/http/app.ts';
import type { Sql } from '../../src/store/sql.ts';
import { API_TOKEN, createTestApp, type TestApp } from './helpers.ts';
import { allEvents, chunkAt, events, gate, sleep, talk } from './streams-support.ts';

const SECRET = 'stream-secret-0123456789';
let t: TestApp;
beforeAll(async () => {
  t = await createTestApp({ tasks: [...exampleTasks, talk], skiplock: { streamTokens: { secret: SECRET } } });
});
afterAll(() => t.close());

/** A finished talk job that wrote `n` chunks. */
async function finished(n: number): Promise<string> {
  const job = await t.skiplock.enqueue({ task: 'talk', payload: { before: n } } as never);
  await t.skiplock.tick({ untilIdle: true });
  expect((await t.skiplock.getJob(job.id))!.status).toBe('DONE');
  return job.id;
}

const seqs = (list: { id: string | undefined }[]) => list.map((e) => Number(e.id));
const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i);

describe('events', () => {
  test('a finished job: every chunk in order (id = seq, data = the chunk as JSON, newlines kept), then end', async () => {
    const id = await finished(250);
    const res = await t.call('GET', `/v1/jobs/${id}/stream`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const list = await allEvents(res);
    const chunks = list.filter((e) => e.event === 'message');
    expect(seqs(chunks)).toEqual(range(1, 250));
    expect(chunks.map((e) => JSON.parse(e.data))).toEqual(range(1, 250).map(chunkAt));
    expect(list.at(-1)!.event).toBe('end');
    expect(list.filter((e) => e.event === 'end')).toHaveLength(1);
  });

  test('Last-Event-ID: k resumes at k+1 with nothing twice; ?after= too; the header wins over ?after=', async () => {
    const id = await finished(30);
    const resumed = (await allEvents(await t.call('GET', `/v1/jobs/${id}/stream`, { headers: { 'last-event-id': '17' } }))).filter((e) => e.event === 'message');
    expect(seqs(resumed)).toEqual(range(18, 30));
    const after = (await allEvents(await t.call('GET', `/v1/jobs/${id}/stream?after=25`))).filter((e) => e.event === 'message');
    expect(seqs(after)).toEqual(range(26, 30));
    const both = (await allEvents(await t.call('GET', `/v1/jobs/${id}/stream?after=2`, { headers: { 'last-event-id': '28' } }))).filter((e) => e.event === 'message');
    expect(seqs(both)).toEqual([29, 30]);
    const atEnd = await allEvents(await t.call('GET', `/v1/jobs/${id}/stream`, { headers: { 'last-event-id': '30' } }));
    expect(atEnd.map((e) => e.event)).toEqual(['end']);
  });

  test('a reader cut after chunk k that reconnects with Last-Event-ID: k gets k+1… and nothing twice, while the job runs', async () => {
    const g = `cut-${Math.random()}`;
    const job = await t.skiplock.enqueue({ task: 'talk', payload: { before: 5, after: 5, gate: g } } as never);
    const ticking = t.skiplock.tick({ untilIdle: true });
    const seen: number[] = [];
    const first = events(await t.call('GET', `/v1/jobs/${job.id}/stream`));
    for await (const e of first) {
      seen.push(Number(e.id));
      if (seen.length === 3) break; // the connection is cut after chunk 3
    }
    const second = events(await t.call('GET', `/v1/jobs/${job.id}/stream`, { headers: { 'last-event-id': String(seen.at(-1)) } }));
    const next = await second.next();
    seen.push(Number(next.value!.id));
    gate(g).open();
    for await (const e of second) {
      if (e.event === 'end') break;
      seen.push(Number(e.id));
    }
    await ticking;
    expect(seen).toEqual(range(1, 10));
  });

  test('a reader while the job runs sees its chunks before the job ends, then end when it does', async () => {
    const g = `live-${Math.random()}`;
    const job = await t.skiplock.enqueue({ task: 'talk', payload: { before: 2, after: 2, gate: g } } as never);
    const ticking = t.skiplock.tick({ untilIdle: true });
    const it = events(await t.call('GET', `/v1/jobs/${job.id}/stream`));
    expect(JSON.parse((await it.next()).value!.data)).toEqual(chunkAt(1));
    expect(JSON.parse((await it.next()).value!.data)).toEqual(chunkAt(2));
    expect((await t.skiplock.getJob(job.id))!.status).toBe('RUNNING');
    gate(g).open();
    const rest: string[] = [];
    for await (const e of it) rest.push(e.event === 'end' ? 'end' : e.id!);
    expect(rest).toEqual(['3', '4', 'end']);
    await ticking;
  });

  test('a job that has not started: a stream with nothing yet, that waits (no end)', async () => {
    const job = await t.skiplock.enqueue({ task: 'talk', payload: { before: 1 }, delayMs: 3_600_000 } as never);
    const app = createApp({ skiplock: t.skiplock, apiToken: API_TOKEN, streamConnectionMs: 400 });
    const started = performance.now();
    const res = await app.request(`/v1/jobs/${job.id}/stream`, { headers: { authorization: `Bearer ${API_TOKEN}` } });
    const text = await res.text();
    expect(res.status).toBe(200);
    expect(text).toBe('retry: 1000\n\n');
    // The connection's life ends the response (EventSource reconnects): not before it.
    expect(performance.now() - started).toBeGreaterThanOrEqual(350);
  });

  test('a client that stops reading does not hold its connection past the connection life', async () => {
    const id = await finished(300);
    const app = createApp({ skiplock: t.skiplock, apiToken: API_TOKEN, streamConnectionMs: 200 });
    const auth = { headers: { authorization: `Bearer ${API_TOKEN}` } };
    const readers = async () => Number(/^skiplock_stream_readers (\d+)$/m.exec(await (await app.request('/metrics', auth)).text())?.[1]);
    const res = await app.request(`/v1/jobs/${id}/stream`, auth); // never read: the route's writes wait
    expect(res.status).toBe(200);
    expect(await readers()).toBe(1);
    await sleep(1500);
    expect(await readers()).toBe(0);
  });

  test('a read that fails mid-stream ends the connection (EventSource resumes) and tells the reader nothing of the error', async () => {
    const job = await t.skiplock.enqueue({ task: 'talk', payload: { before: 1 }, delayMs: 3_600_000 } as never);
    let failing = false;
    const sql = { ...t.db.sql, query: ((s) => (failing && s.text.includes('LEFT JOIN LATERAL') ? Promise.reject(new Error('relation "secret_table" does not exist')) : t.db.sql.query(s))) as Sql['query'] };
    const { createSkiplock } = await import('../../src/index.ts');
    const app = createApp({ skiplock: createSkiplock({ sql, tasks: [talk], log: () => {} }), apiToken: API_TOKEN });
    const errors: unknown[] = [];
    const original = console.error;
    console.error = (...args: unknown[]) => void errors.push(args);
    try {
      const res = await app.request(`/v1/jobs/${job.id}/stream`, { headers: { authorization: `Bearer ${API_TOKEN}` } });
      expect(res.status).toBe(200);
      failing = true;
      const text = await res.text(); // the connection ends at the next poll's failure
      expect(text).not.toMatch(/secret_table|event: error|event: end/);
      expect(errors).toHaveLength(1);
    } finally {
      console.error = original;
    }
  });

  test('a silent stream gets a comment line every heartbeat', async () => {
    const job = await t.skiplock.enqueue({ task: 'talk', payload: { before: 1 }, delayMs: 3_600_000 } as never);
    const app = createApp({ skiplock: t.skiplock, apiToken: API_TOKEN, streamConnectionMs: 700, streamHeartbeatMs: 200 });
    const text = await (await app.request(`/v1/jobs/${job.id}/stream`, { headers: { authorization: `Bearer ${API_TOKEN}` } })).text();
    expect(text.match(/^: keep-alive$/gm)?.length ?? 0).toBeGreaterThanOrEqual(2);
  });
});

describe('auth', () => {
  test('without a token: 401', async () => {
    const id = await finished(1);
    const res = await t.call('GET', `/v1/jobs/${id}/stream`, { token: null });
    expect(res.status).toBe(401);
    expect(((await res.json()) as any).error.code).toBe('unauthorized');
  });

  test('a read token works on its job’s stream without the bearer token (any origin may read it)', async () => {
    const id = await finished(3);
    const token = await t.skiplock.streamToken(id, { ttlMs: 60_000 });
    expect(token).toMatch(/^\d+\.\d+\.[A-Za-z0-9_-]{43}$/);
    const res = await t.call('GET', `/v1/jobs/${id}/stream?token=${encodeURIComponent(token)}`, { token: null });
    expect(res.status).toBe(200);
    expect(res.headers.get('access-control-allow-origin')).toBe('*');
    expect(seqs((await allEvents(res)).filter((e) => e.event === 'message'))).toEqual([1, 2, 3]);
    // Every stream of the job (the name is not in the token).
    const other = await t.call('GET', `/v1/jobs/${id}/stream?name=other&token=${token}`, { token: null });
    expect(other.status).toBe(200);
    expect((await allEvents(other)).map((e) => e.event)).toEqual(['end']);
  });

  test('it is refused on another job’s stream, on any other route, after it expires, and when forged', async () => {
    const id = await finished(1);
    const other = await finished(1);
    const token = await t.skiplock.streamToken(id, { ttlMs: 1000 });
    const status = async (path: string, method = 'GET') => {
      const res = await t.call(method, path, { token: null });
      await res.body?.cancel(); // a reader that goes away
      return res.status;
    };
    expect(await status(`/v1/jobs/${other}/stream?token=${token}`)).toBe(401);
    expect(await status(`/v1/jobs/${id}?token=${token}`)).toBe(401);
    expect(await status(`/v1/jobs?token=${token}`)).toBe(401);
    expect(await status(`/v1/jobs/${id}/cancel?token=${token}`, 'POST')).toBe(401);
    expect(await status(`/v1/jobs/${id}/stream/x?token=${token}`)).toBe(401);
    expect(await status(`/metrics?token=${token}`)).toBe(401);
    const [job, expires, signature] = token.split('.');
    expect(await status(`/v1/jobs/${id}/stream?token=${job}.${Number(expires) + 60_000}.${signature}`)).toBe(401);
    expect(await status(`/v1/jobs/${id}/stream?token=${other}.${expires}.${signature}`)).toBe(401);
    expect(await status(`/v1/jobs/${id}/stream?token=nonsense`)).toBe(401);
    // A token signed with another secret.
    const { createSkiplock } = await import('../../src/index.ts');
    const stranger = createSkiplock({ sql: t.db.sql, tasks: [], streamTokens: { secret: 'another-secret-0123456789' } });
    expect(await status(`/v1/jobs/${id}/stream?token=${await stranger.streamToken(id)}`)).toBe(401);
    expect(await status(`/v1/jobs/${id}/stream?token=${token}`)).toBe(200);
    await sleep(1100);
    const expired = await t.call('GET', `/v1/jobs/${id}/stream?token=${token}`, { token: null });
    expect(expired.status).toBe(401);
    expect(((await expired.json()) as any).error.message).toMatch(/expired/);
  });

  test('under a mount prefix, the token works the same (and only on the stream)', async () => {
    const { mount } = await import('../../src/http/mount.ts');
    const mounted = mount(createApp({ skiplock: t.skiplock, apiToken: API_TOKEN }), '/api/skiplock');
    const id = await finished(2);
    const token = await t.skiplock.streamToken(id);
    const res = await mounted.fetch(new Request(`http://x.test/api/skiplock/v1/jobs/${id}/stream?token=${token}`));
    expect(res.status).toBe(200);
    expect((await allEvents(res)).map((e) => e.id ?? e.event)).toEqual(['1', '2', 'end']);
    expect((await mounted.fetch(new Request(`http://x.test/api/skiplock/v1/jobs/${id}?token=${token}`))).status).toBe(401);
  });

  test('streamToken: a bad ttlMs or id is invalid_request; without a secret, a TypeError naming the option', async () => {
    for (const ttlMs of [0, 999, 86_400_001, 1.5, Number.NaN, '60000' as never])
      await expect(t.skiplock.streamToken('1', { ttlMs })).rejects.toMatchObject({ code: 'invalid_request' });
    await expect(t.skiplock.streamToken('abc')).rejects.toMatchObject({ code: 'invalid_request' });
    await expect(t.skiplock.streamToken('1', { ttlMs: 86_400_000 })).resolves.toMatch(/^1\./);
    const { createSkiplock } = await import('../../src/index.ts');
    const bare = createSkiplock({ sql: t.db.sql, tasks: [] });
    await expect(bare.streamToken('1')).rejects.toThrow(/streamTokens: \{ secret \}/);
    // callbacks.secret is the default secret.
    const withCallbacks = createSkiplock({ sql: t.db.sql, tasks: [], callbacks: { secret: SECRET, publicUrl: 'https://x.test' } });
    expect(await t.skiplock.verifyStreamToken(await withCallbacks.streamToken('7'))).toMatchObject({ jobId: '7' });
  });
});

describe('bad input: 400 or 404, with nothing streamed', () => {
  test.each([
    ['/v1/jobs/abc/stream', 400],
    ['/v1/jobs/0/stream', 400],
    ['/v1/jobs/1/stream?name=bad%20name', 400],
    ['/v1/jobs/1/stream?after=-1', 400],
    ['/v1/jobs/1/stream?after=x', 400],
    ['/v1/jobs/1/stream?after=99999999999', 400],
    ['/v1/jobs/999999999/stream', 404],
  ])('%s: %i', async (path, code) => {
    const res = await t.call('GET', path);
    expect(res.status).toBe(code);
    expect(res.headers.get('content-type')).toMatch(/json/);
  });

  test('a malformed Last-Event-ID: 400', async () => {
    const id = await finished(1);
    expect((await t.call('GET', `/v1/jobs/${id}/stream`, { headers: { 'last-event-id': 'seven' } })).status).toBe(400);
  });
});

describe('/metrics', () => {
  const metric = async (name: string) => {
    const text = await (await t.call('GET', '/metrics')).text();
    const line = text.split('\n').find((l) => l.startsWith(`${name} `));
    expect(text, name).toContain(`# TYPE ${name} ${name.endsWith('_total') ? 'counter' : 'gauge'}`);
    return Number(line?.split(' ')[1]);
  };

  test('skiplock_stream_chunks_written_total counts the chunks this process’s runs stored; skiplock_stream_readers the open SSE readers', async () => {
    const written = await metric('skiplock_stream_chunks_written_total');
    await finished(7);
    expect((await metric('skiplock_stream_chunks_written_total')) - written).toBe(7);
    const job = await t.skiplock.enqueue({ task: 'talk', payload: { before: 1 }, delayMs: 3_600_000 } as never);
    expect(await metric('skiplock_stream_readers')).toBe(0);
    const a = await t.call('GET', `/v1/jobs/${job.id}/stream`);
    const b = await t.call('GET', `/v1/jobs/${job.id}/stream`);
    expect(await metric('skiplock_stream_readers')).toBe(2);
    await a.body!.cancel(); // the browser went away
    await b.body!.cancel();
    await sleep(50);
    expect(await metric('skiplock_stream_readers')).toBe(0);
  });
});
