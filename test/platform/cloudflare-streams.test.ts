/**
 * Streams in the real Workers runtime (wrangler dev, workerd), reaching PostgreSQL through the
 * Neon HTTP driver and the local Neon proxy: a reader of GET /v1/jobs/{id}/stream — with a read
 * token (?token=, signed in Node with the Worker's secret, checked inside workerd) — sees a job's
 * chunks while the job runs, in order, then `end`.
 */
import { afterAll, beforeAll, expect, test } from 'vitest';
import { parseSse } from '../../src/client/sse.ts';
import { createSkiplock } from '../../src/index.ts';
import { jobRow } from '../support/job-rows.ts';
import { startWorkerUnderTest, type WorkerUnderTest } from './worker-under-test.ts';

const TOKEN = 'stream-test-token-0123456789';
let under: WorkerUnderTest;

beforeAll(async () => {
  under = await startWorkerUnderTest({ API_TOKEN: TOKEN, TICKER: 'cron', TICK_POLL_INTERVAL_MS: '200' }, { config: 'test/fixtures/stream-worker/wrangler.toml' });
}, 120_000);
afterAll(() => under?.stop());

test('a reader sees the chunks of a running job as they are written, then end (read token, workerd)', async () => {
  const response = await fetch(`${under.worker.url}/v1/jobs`, {
    method: 'POST',
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify({ task: 'drip', payload: { n: 20, everyMs: 100 } }),
  });
  expect(response.status).toBe(201);
  const { job } = (await response.json()) as { job: { id: string } };
  // The Worker signs with CALLBACK_SECRET, or else API_TOKEN: the same secret here.
  const token = await createSkiplock({ sql: under.db.sql, tasks: [], streamTokens: { secret: TOKEN } }).streamToken(job.id);
  const stream = await fetch(`${under.worker.url}/v1/jobs/${job.id}/stream?token=${token}`);
  expect(stream.status).toBe(200);
  expect(stream.headers.get('content-type')).toMatch(/^text\/event-stream/);
  const seqs: number[] = [];
  const whileRunning: number[] = [];
  let ended = false;
  for await (const event of parseSse(stream.body!)) {
    if (event.event === 'end') {
      ended = true;
      break;
    }
    const seq = Number(event.id);
    seqs.push(seq);
    expect(JSON.parse(event.data)).toEqual(seq % 2 === 0 ? { i: seq } : `drop ${seq}\nof 20`);
    if ((await jobRow(under.db.sql, job.id)).status === 'RUNNING') whileRunning.push(seq);
  }
  expect(ended).toBe(true);
  expect(seqs).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
  // Most chunks arrived while the job still ran (2 s of writing), not all at its end.
  expect(whileRunning.length).toBeGreaterThanOrEqual(5);
  expect((await jobRow(under.db.sql, job.id)).status).toBe('DONE');
  // Another job's stream refuses the token; without any token, 401.
  expect((await fetch(`${under.worker.url}/v1/jobs/${Number(job.id) + 1}/stream?token=${token}`)).status).toBe(401);
  expect((await fetch(`${under.worker.url}/v1/jobs/${job.id}/stream`)).status).toBe(401);
}, 60_000);

test('two readers of one job share its poll across requests; the first leaving mid-stream does not stall the other', async () => {
  const response = await fetch(`${under.worker.url}/v1/jobs`, {
    method: 'POST',
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify({ task: 'drip', payload: { n: 20, everyMs: 100 } }),
  });
  const { job } = (await response.json()) as { job: { id: string } };
  const open = () => fetch(`${under.worker.url}/v1/jobs/${job.id}/stream`, { headers: { authorization: `Bearer ${TOKEN}` } });
  const [first, second] = await Promise.all([open(), open()]);
  const leaving = (async () => {
    const seqs: number[] = [];
    for await (const event of parseSse(first.body!)) {
      seqs.push(Number(event.id));
      if (seqs.length === 3) break; // the request ends here
    }
    return seqs;
  })();
  const staying = (async () => {
    const seqs: number[] = [];
    for await (const event of parseSse(second.body!)) {
      if (event.event === 'end') return seqs;
      seqs.push(Number(event.id));
    }
    return seqs;
  })();
  expect(await leaving).toEqual([1, 2, 3]);
  expect(await staying).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
}, 60_000);
