/** Over HTTP: POST /v1/jobs?wait=, the traceparent header, and history / progress in the job JSON. */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { z } from 'zod';
import { defineTask } from '../../src/index.ts';
import { echo, flaky } from '../../src/tasks/examples.ts';
import { createTestApp, type TestApp } from './helpers.ts';

let release!: () => void;
const gate = new Promise<void>((resolve) => (release = resolve));
const gated = defineTask({ name: 'gated', payload: z.object({}), handler: async (_p, ctx) => {
  ctx.progress({ waiting: true });
  await gate;
  return 'released';
} });

let t: TestApp;
/** The ticks the app started after an enqueue (runInBackground), awaited before the database goes. */
const background: Promise<unknown>[] = [];
beforeAll(async () => {
  t = await createTestApp({
    tasks: [echo, flaky, gated],
    app: { runInBackground: (work) => void background.push(work), tick: { untilIdle: true, budgetMs: 20_000, pollIntervalMs: 10, leaseMs: 300 } },
  });
});
afterAll(async () => {
  release();
  await Promise.all(background);
  await t.close();
});

async function post(path: string, body: unknown, headers: Record<string, string> = {}) {
  const res = await t.call('POST', path, { body, headers });
  return { status: res.status, body: (await res.json()) as any };
}

describe('POST /v1/jobs?wait=', () => {
  test('a fast job: 200 with the finished job, its result and its history', async () => {
    const { status, body } = await post('/v1/jobs?wait=10', { task: 'echo', payload: { message: 'now' } });
    expect(status).toBe(200);
    expect(body.job).toMatchObject({ status: 'DONE', result: { message: 'now' }, attempts: 1 });
    expect(body.job.history).toEqual([
      expect.objectContaining({ attempt: 1, outcome: 'done', error: null, worker: expect.stringMatching(/^tick:/), durationMs: expect.any(Number) }),
    ]);
  });

  test('a slow job: 202 with the job as it is once the wait is over; GET shows its progress', async () => {
    const { status, body } = await post('/v1/jobs?wait=0.5', { task: 'gated', payload: {} });
    expect(status).toBe(202);
    expect(['QUEUED', 'RUNNING']).toContain(body.job.status);
    // The progress rides on the heartbeat (every leaseMs / 3 = 100 ms here).
    let job: any;
    for (let i = 0; i < 200; i += 1) {
      job = ((await (await t.call('GET', `/v1/jobs/${body.job.id}`)).json()) as any).job;
      if (job.progress !== null) break;
      await new Promise((r) => setTimeout(r, 20));
    }
    expect(job).toMatchObject({ status: 'RUNNING', progress: { waiting: true }, startedAt: expect.any(String) });
  });

  test('a retried job: every attempt in the history', async () => {
    const { status, body } = await post('/v1/jobs?wait=20', { task: 'flaky', payload: { failTimes: 1 } });
    expect(status).toBe(200);
    expect(body.job.history.map((h: any) => [h.attempt, h.outcome, h.error])).toEqual([
      [1, 'retry', expect.stringMatching(/attempt 1/)],
      [2, 'done', null],
    ]);
  });

  test('a replay of an idempotency key waits for the original job', async () => {
    const first = await post('/v1/jobs', { task: 'echo', payload: { message: 'first' }, idempotencyKey: 'wait-replay' });
    expect(first.status).toBe(201);
    const replay = await post('/v1/jobs?wait=10', { task: 'echo', payload: { message: 'second' }, idempotencyKey: 'wait-replay' });
    expect(replay.status).toBe(200);
    expect(replay.body.job).toMatchObject({ id: first.body.job.id, status: 'DONE', result: { message: 'first' } });
  });

  test.each([['abc'], ['-1'], ['26'], ['25.001'], ['1e1'], [''], ['0.0001'], ['100'], [' 5'], ['5s'], ['0x10'], ['1&wait=2']])(
    'wait=%s: 400, nothing written',
    async (wait) => {
      const before = await t.countJobs();
      const { status, body } = await post(`/v1/jobs?wait=${wait}`, { task: 'echo', payload: { message: 'x' } });
      expect(status).toBe(400);
      expect(body.error).toMatchObject({ code: 'invalid_request', issues: [expect.objectContaining({ path: ['wait'] })] });
      expect(await t.countJobs()).toBe(before);
    },
  );

  test('wait=0 answers at once; wait=25 is allowed', async () => {
    expect((await post('/v1/jobs?wait=0', { task: 'gated', payload: {} })).status).toBe(202);
    expect((await post('/v1/jobs?wait=25', { task: 'echo', payload: { message: 'x' } })).status).toBe(200);
  });

  test('maxWaitMs cuts a longer wait: the request never holds past it', async () => {
    const short = await createTestApp({ tasks: [gated], app: { maxWaitMs: 100 } });
    try {
      const res = await short.call('POST', '/v1/jobs?wait=25', { body: { task: 'gated', payload: {} } });
      expect(res.status).toBe(202);
      expect(((await res.json()) as any).job.status).toBe('QUEUED');
    } finally {
      await short.close();
    }
  });
});

describe('traceparent', () => {
  const header = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
  const body = '00-11111111111111111111111111111111-2222222222222222-00';

  test('the header is stored with the job; the body field wins; a malformed header is ignored', async () => {
    expect((await post('/v1/jobs', { task: 'echo', payload: { message: 'x' } }, { traceparent: header })).body.job.traceparent).toBe(header);
    expect((await post('/v1/jobs', { task: 'echo', payload: { message: 'x' }, traceparent: body }, { traceparent: header })).body.job.traceparent).toBe(body);
    const ignored = await post('/v1/jobs', { task: 'echo', payload: { message: 'x' } }, { traceparent: 'not-a-trace' });
    expect(ignored.status).toBe(201);
    expect(ignored.body.job.traceparent).toBeNull();
    const batch = await post('/v1/jobs/batch', { jobs: [{ task: 'echo', payload: { message: 'a' } }, { task: 'echo', payload: { message: 'b' }, traceparent: body }] }, { traceparent: header });
    expect(batch.body.jobs.map((j: any) => j.traceparent)).toEqual([header, body]);
  });

  test('a malformed body field is refused: 400, nothing written', async () => {
    const before = await t.countJobs();
    const { status } = await post('/v1/jobs', { task: 'echo', payload: { message: 'x' }, traceparent: 'nope' });
    expect(status).toBe(400);
    expect(await t.countJobs()).toBe(before);
  });
});

test('the OpenAPI document has ?wait=, the 202, the traceparent header and the history', async () => {
  const doc = (await (await t.call('GET', '/openapi.json')).json()) as any;
  const op = doc.paths['/v1/jobs'].post;
  expect(op.parameters.map((p: any) => `${p.in}:${p.name}`)).toEqual(expect.arrayContaining(['query:wait', 'header:traceparent', 'header:idempotency-key']));
  expect(Object.keys(op.responses)).toEqual(expect.arrayContaining(['200', '201', '202', '400']));
  const job = doc.components.schemas.Job.properties;
  expect(Object.keys(job)).toEqual(expect.arrayContaining(['history', 'progress', 'traceparent', 'startedAt']));
  expect(doc.components.schemas.AttemptRecord.properties.outcome.enum).toEqual(['done', 'retry', 'dead', 'released', 'sleeping', 'waiting', 'lease-lost', 'cancelled']);
});
