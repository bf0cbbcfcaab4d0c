import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { createTestApp, type TestApp } from './helpers.ts';

let t: TestApp;
beforeAll(async () => (t = await createTestApp()));
afterAll(() => t.close());

async function json(res: Response): Promise<any> {
  return res.json();
}

async function enqueue(body: unknown, headers?: Record<string, string>) {
  const res = await t.call('POST', '/v1/jobs', { body, ...(headers ? { headers } : {}) });
  return { status: res.status, body: await json(res) };
}

function expectError(body: any, code: string) {
  expect(body).toMatchObject({ error: { code, message: expect.any(String) } });
}

describe('POST /v1/jobs', () => {
  test('enqueues a job: 201 with the job as CONTRACT.md shapes it', async () => {
    const { status, body } = await enqueue({ task: 'echo', payload: { message: 'hi' }, priority: 3, maxAttempts: 2, timeoutMs: 500 });
    expect(status).toBe(201);
    expect(body.job).toMatchObject({
      id: expect.stringMatching(/^\d+$/),
      task: 'echo',
      payload: { message: 'hi' },
      status: 'QUEUED',
      priority: 3,
      attempts: 0,
      maxAttempts: 2,
      timeoutMs: 500,
      lockedBy: null,
      lockedUntil: null,
      lastError: null,
      result: null,
      idempotencyKey: null,
      finishedAt: null,
    });
    for (const key of ['runAt', 'createdAt', 'updatedAt']) expect(new Date(body.job[key]).toISOString()).toBe(body.job[key]);
  });

  test('runAt and delayMs set when the job is due', async () => {
    const at = '2099-01-01T00:00:00.000Z';
    expect((await enqueue({ task: 'echo', payload: { message: 'later' }, runAt: '2099-01-01T01:00:00+01:00' })).body.job.runAt).toBe(at);
    const delayed = (await enqueue({ task: 'echo', payload: { message: 'later' }, delayMs: 3_600_000 })).body.job;
    expect(new Date(delayed.runAt).getTime() - new Date(delayed.createdAt).getTime()).toBe(3_600_000);
  });

  test('the same idempotency key (body field or header) returns the original job with 200', async () => {
    const first = await enqueue({ task: 'echo', payload: { message: 'once' }, idempotencyKey: 'order-1' });
    expect(first.status).toBe(201);
    const before = await t.countJobs();
    const again = await enqueue({ task: 'echo', payload: { message: 'different payload' }, idempotencyKey: 'order-1' });
    expect(again.status).toBe(200);
    expect(again.body.job).toEqual(first.body.job);
    const viaHeader = await enqueue({ task: 'echo', payload: { message: 'x' } }, { 'Idempotency-Key': 'order-1' });
    expect(viaHeader.status).toBe(200);
    expect(viaHeader.body.job.id).toBe(first.body.job.id);
    expect(await t.countJobs()).toBe(before);

    const headerOnly = await enqueue({ task: 'echo', payload: { message: 'h' } }, { 'Idempotency-Key': 'order-2' });
    expect(headerOnly.status).toBe(201);
    expect(headerOnly.body.job.idempotencyKey).toBe('order-2');
    const same = await enqueue({ task: 'echo', payload: { message: 'h' }, idempotencyKey: 'order-2' }, { 'Idempotency-Key': 'order-2' });
    expect(same.status).toBe(200);
  });

  test.each([
    ['malformed JSON', '{"task": "echo",', {}, 'invalid_json'],
    ['an empty body', '', {}, 'invalid_json'],
    ['a text/plain body', '{"task":"echo","payload":{"message":"x"}}', { 'content-type': 'text/plain' }, 'invalid_request'],
    ['a form body', 'task=echo', { 'content-type': 'application/x-www-form-urlencoded' }, 'invalid_request'],
    ['a JSON array', '[]', {}, 'invalid_request'],
    ['JSON null', 'null', {}, 'invalid_request'],
    ['a missing task', { payload: { message: 'x' } }, {}, 'invalid_request'],
    ['an unknown field', { task: 'echo', payload: { message: 'x' }, prio: 1 }, {}, 'invalid_request'],
    ['a float priority', { task: 'echo', payload: { message: 'x' }, priority: 1.5 }, {}, 'invalid_request'],
    ['a huge priority', { task: 'echo', payload: { message: 'x' }, priority: 1e300 }, {}, 'invalid_request'],
    ['a priority beyond JSON doubles', '{"task":"echo","payload":{"message":"x"},"priority":1e400}', {}, 'invalid_request'],
    ['runAt and delayMs together', { task: 'echo', payload: { message: 'x' }, runAt: '2030-01-01T00:00:00Z', delayMs: 5 }, {}, 'invalid_request'],
    ['a runAt without offset', { task: 'echo', payload: { message: 'x' }, runAt: '2030-01-01T00:00:00' }, {}, 'invalid_request'],
    ['a runAt on February 30', { task: 'echo', payload: { message: 'x' }, runAt: '2024-02-30T00:00:00Z' }, {}, 'invalid_request'],
    ['a runAt in year 0', { task: 'echo', payload: { message: 'x' }, runAt: '0000-06-01T00:00:00Z' }, {}, 'invalid_request'],
    ['an empty idempotency key', { task: 'echo', payload: { message: 'x' }, idempotencyKey: '' }, {}, 'invalid_request'],
    ['an idempotency key with NUL', { task: 'echo', payload: { message: 'x' }, idempotencyKey: 'a\u0000b' }, {}, 'invalid_request'],
    ['an idempotency key with a lone surrogate', { task: 'echo', payload: { message: 'x' }, idempotencyKey: 'a\ud800' }, {}, 'invalid_request'],
    ['an idempotency key of 256 chars', { task: 'echo', payload: { message: 'x' }, idempotencyKey: 'k'.repeat(256) }, {}, 'invalid_request'],
    ['header and body keys that differ', { task: 'echo', payload: { message: 'x' }, idempotencyKey: 'a' }, { 'idempotency-key': 'b' }, 'invalid_request'],
    ['a body nested 5000 deep', `{"task":"echo","payload":${'['.repeat(5000)}${']'.repeat(5000)}}`, {}, 'invalid_request'],
    ['an unknown task', { task: 'no-such-task', payload: {} }, {}, 'unknown_task'],
    ['a payload of the wrong shape', { task: 'echo', payload: { message: 42 } }, {}, 'invalid_payload'],
    ['a missing payload the task needs', { task: 'echo' }, {}, 'invalid_payload'],
    ['a payload with NUL', { task: 'echo', payload: { message: 'a\u0000' } }, {}, 'invalid_payload'],
    ['a payload with a lone surrogate', '{"task":"echo","payload":{"message":"\\udc00"}}', {}, 'invalid_payload'],
  ])('%s → 400 %s, nothing written', async (_name, body, headers, code) => {
    const before = await t.countJobs();
    const res = await t.call('POST', '/v1/jobs', { body, headers });
    expect(res.status).toBe(400);
    expectError(await json(res), code);
    expect(await t.countJobs()).toBe(before);
  });

  test('validation errors list issues with paths', async () => {
    const { body } = await enqueue({ task: 'echo', payload: { message: 1 }, priority: 'high' });
    expect(body.error.issues).toContainEqual({ path: ['priority'], message: expect.any(String) });
    const payload = await enqueue({ task: 'sleep', payload: { ms: -1 } });
    expect(payload.body).toMatchObject({ error: { code: 'invalid_payload', issues: [{ path: ['payload', 'ms'] }] } });
  });
});

describe('POST /v1/jobs/batch', () => {
  test('enqueues every job in order: 201 {jobs}', async () => {
    const jobs = Array.from({ length: 5 }, (_, i) => ({ task: 'echo', payload: { message: `m${i}` } }));
    const res = await t.call('POST', '/v1/jobs/batch', { body: { jobs } });
    expect(res.status).toBe(201);
    const body = await json(res);
    expect(body.jobs.map((j: any) => j.payload.message)).toEqual(['m0', 'm1', 'm2', 'm3', 'm4']);
    const ids = body.jobs.map((j: any) => BigInt(j.id));
    expect([...ids].sort((a, b) => (a < b ? -1 : 1))).toEqual(ids);
  });

  test('1000 jobs with one invalid writes nothing; 1000 valid ones are all written', async () => {
    const jobs: unknown[] = Array.from({ length: 1000 }, (_, i) => ({ task: 'echo', payload: { message: `n${i}` } }));
    const before = await t.countJobs();
    jobs[737] = { task: 'echo', payload: { message: 737 } };
    const bad = await t.call('POST', '/v1/jobs/batch', { body: { jobs } });
    expect(bad.status).toBe(400);
    expect(await json(bad)).toMatchObject({ error: { code: 'invalid_payload', issues: [{ path: ['jobs', 737, 'payload', 'message'] }] } });
    expect(await t.countJobs()).toBe(before);

    jobs[737] = { task: 'echo', payload: { message: 'fixed' } };
    const good = await t.call('POST', '/v1/jobs/batch', { body: { jobs } });
    expect(good.status).toBe(201);
    expect((await json(good)).jobs).toHaveLength(1000);
    expect(await t.countJobs()).toBe(before + 1000);
  });

  test('errors: too many jobs, bad envelope, unknown task, duplicate keys, one-job batches keep their path', async () => {
    const before = await t.countJobs();
    const cases: [unknown, string, unknown?][] = [
      [{ jobs: Array.from({ length: 1001 }, () => ({ task: 'echo', payload: { message: 'x' } })) }, 'invalid_request', ['jobs']],
      [{ jobs: {} }, 'invalid_request', ['jobs']],
      [[{ task: 'echo' }], 'invalid_request'],
      [{ jobs: [{ task: 'echo', payload: { message: 'x' } }], extra: 1 }, 'invalid_request'],
      [{ jobs: [{ task: 'echo', payload: { message: 'x' } }, { task: 'nope' }] }, 'unknown_task'],
      [{ jobs: [{ task: 'echo', payload: { message: 'x' } }, { tusk: 'echo' }] }, 'invalid_request', ['jobs', 1, 'task']],
      [{ jobs: [{ task: 'echo', payload: {} }] }, 'invalid_payload', ['jobs', 0, 'payload', 'message']],
      [
        { jobs: [{ task: 'echo', payload: { message: 'a' }, idempotencyKey: 'dup' }, { task: 'echo', payload: { message: 'b' }, idempotencyKey: 'dup' }] },
        'invalid_request',
        ['jobs', 1, 'idempotencyKey'],
      ],
    ];
    for (const [body, code, path] of cases) {
      const res = await t.call('POST', '/v1/jobs/batch', { body });
      expect(res.status, JSON.stringify(body).slice(0, 100)).toBe(400);
      const error = await json(res);
      expectError(error, code);
      if (path) expect(error.error.issues[0].path).toEqual(path);
    }
    expect(await t.countJobs()).toBe(before);
  });

  test('an empty batch is accepted and writes nothing', async () => {
    const res = await t.call('POST', '/v1/jobs/batch', { body: { jobs: [] } });
    expect(res.status).toBe(201);
    expect(await json(res)).toEqual({ jobs: [] });
  });

  test('a batch replays keyed jobs that exist and creates the rest', async () => {
    const original = (await enqueue({ task: 'echo', payload: { message: 'o' }, idempotencyKey: 'batch-key' })).body.job;
    const res = await t.call('POST', '/v1/jobs/batch', {
      body: { jobs: [{ task: 'echo', payload: { message: 'new' } }, { task: 'echo', payload: { message: 'o2' }, idempotencyKey: 'batch-key' }] },
    });
    expect(res.status).toBe(201);
    const { jobs } = await json(res);
    expect(jobs[1]).toEqual(original);
    expect(jobs[0].payload).toEqual({ message: 'new' });
  });
});

describe('GET /v1/jobs/:id', () => {
  test('returns the job', async () => {
    const { job } = (await enqueue({ task: 'echo', payload: { message: 'get me' } })).body;
    const res = await t.call('GET', `/v1/jobs/${job.id}`);
    expect(res.status).toBe(200);
    // With its durable steps and children (none here); lists and the enqueue answer carry neither.
    expect((await json(res)).job).toEqual({ ...job, steps: [], children: [] });
  });

  test.each(['999999999', 'abc', '99999999999999999999', '9223372036854775808', '0', '-1', '1e3', '007', '%00', '%zz', '%20%201'])(
    '%s → 404',
    async (id) => {
      const res = await t.call('GET', `/v1/jobs/${id}`);
      expect(res.status).toBe(404);
      expectError(await json(res), 'not_found');
    },
  );
});

describe('POST /v1/jobs/:id/cancel and /retry', () => {
  test('cancel: QUEUED → CANCELLED 200; again → 409; unknown → 404', async () => {
    const { job } = (await enqueue({ task: 'echo', payload: { message: 'cancel me' } })).body;
    const res = await t.call('POST', `/v1/jobs/${job.id}/cancel`);
    expect(res.status).toBe(200);
    expect((await json(res)).job).toMatchObject({ id: job.id, status: 'CANCELLED', finishedAt: expect.any(String) });
    const again = await t.call('POST', `/v1/jobs/${job.id}/cancel`);
    expect(again.status).toBe(409);
    expectError(await json(again), 'conflict');
    for (const id of ['424242424', 'abc', '99999999999999999999']) {
      const missing = await t.call('POST', `/v1/jobs/${id}/cancel`);
      expect(missing.status).toBe(404);
      expectError(await json(missing), 'not_found');
    }
  });

  test('retry: CANCELLED → QUEUED due now, attempts 0; QUEUED → 409; unknown → 404', async () => {
    const { job } = (await enqueue({ task: 'echo', payload: { message: 'retry me' }, delayMs: 3_600_000 })).body;
    const queued = await t.call('POST', `/v1/jobs/${job.id}/retry`);
    expect(queued.status).toBe(409);
    expectError(await json(queued), 'conflict');
    await t.call('POST', `/v1/jobs/${job.id}/cancel`);
    const res = await t.call('POST', `/v1/jobs/${job.id}/retry`);
    expect(res.status).toBe(200);
    const retried = (await json(res)).job;
    expect(retried).toMatchObject({ status: 'QUEUED', attempts: 0, finishedAt: null });
    expect(new Date(retried.runAt).getTime()).toBeLessThan(new Date(job.runAt).getTime());
    const missing = await t.call('POST', '/v1/jobs/31337000/retry');
    expect(missing.status).toBe(404);
  });
});
