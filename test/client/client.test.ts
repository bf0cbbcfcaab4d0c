/** skiplock/client against the real app on a real PostgreSQL; its fetch calls app.fetch directly. */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { createClient, SkiplockApiError, type SkiplockClient } from '../../src/client/index.ts';
import { API_TOKEN, createTestApp, type TestApp } from '../http/helpers.ts';

let t: TestApp;
let client: SkiplockClient;
const seen: Request[] = [];

beforeAll(async () => {
  t = await createTestApp();
  client = createClient({
    url: 'http://skiplock.test/',
    token: API_TOKEN,
    fetch: async (request) => {
      seen.push(request.clone());
      return t.app.fetch(request);
    },
  });
});
afterAll(() => t.close());

async function rejection(promise: Promise<unknown>): Promise<SkiplockApiError> {
  const error = await promise.then(() => undefined, (e: unknown) => e);
  expect(error).toBeInstanceOf(SkiplockApiError);
  return error as SkiplockApiError;
}

describe('jobs', () => {
  test('enqueue sends the bearer token and JSON, and returns the job', async () => {
    const job = await client.enqueue({ task: 'echo', payload: { message: 'hi' }, priority: 3 });
    expect(job).toMatchObject({ id: expect.stringMatching(/^\d+$/), task: 'echo', payload: { message: 'hi' }, status: 'QUEUED', priority: 3 });
    const request = seen.at(-1)!;
    expect(request.url).toBe('http://skiplock.test/v1/jobs');
    expect(request.headers.get('authorization')).toBe(`Bearer ${API_TOKEN}`);
    expect(request.headers.get('content-type')).toBe('application/json');
  });

  test('enqueueWithResult tells a new job from an idempotency-key replay', async () => {
    const first = await client.enqueueWithResult({ task: 'echo', payload: { message: 'once' }, idempotencyKey: 'client-k1' });
    const again = await client.enqueueWithResult({ task: 'echo', payload: { message: 'once' }, idempotencyKey: 'client-k1' });
    expect(first.created).toBe(true);
    expect(again).toEqual({ job: first.job, created: false });
  });

  test('enqueueBatch: all jobs in input order', async () => {
    const jobs = await client.enqueueBatch([
      { task: 'echo', payload: { message: 'a' } },
      { task: 'sleep', payload: { ms: 1 }, delayMs: 60_000 },
    ]);
    expect(jobs.map((j) => j.task)).toEqual(['echo', 'sleep']);
  });

  test('getJob; undefined for a job that does not exist', async () => {
    const job = await client.enqueue({ task: 'echo', payload: { message: 'get' } });
    expect(await client.getJob(job.id)).toEqual({ ...job, steps: [], children: [] });
    expect(await client.getJob('999999999')).toBeUndefined();
  });

  test('listJobs pages with the query parameters', async () => {
    const page = await client.listJobs({ task: 'echo', status: 'QUEUED', limit: 2 });
    expect(page.jobs).toHaveLength(2);
    expect(page.jobs.every((j) => j.task === 'echo' && j.status === 'QUEUED')).toBe(true);
    expect(seen.at(-1)!.url).toBe('http://skiplock.test/v1/jobs?task=echo&status=QUEUED&limit=2');
    const next = await client.listJobs({ task: 'echo', limit: 2, cursor: page.nextCursor! });
    expect(next.jobs.map((j) => j.id)).not.toContain(page.jobs[0]!.id);
  });

  test('cancelJob, retryJob; a second cancel is a conflict (409)', async () => {
    const job = await client.enqueue({ task: 'echo', payload: { message: 'cancel me' }, delayMs: 60_000 });
    expect(await client.cancelJob(job.id)).toMatchObject({ outcome: 'cancelled', job: { id: job.id, status: 'CANCELLED' } });
    const error = await rejection(client.cancelJob(job.id));
    expect(error).toMatchObject({ status: 409, code: 'conflict' });
    expect(await client.retryJob(job.id)).toMatchObject({ id: job.id, status: 'QUEUED' });
  });

  test('restartJob: a second one of the same job is a conflict (409); bulk: a dry run has changed 0 and wouldChange', async () => {
    const job = await client.enqueue({ task: 'echo', payload: { message: 'restart me' }, delayMs: 60_000 });
    await client.cancelJob(job.id);
    expect(await client.restartJob(job.id)).toMatchObject({ id: job.id, status: 'QUEUED', attempts: 0 });
    expect(await rejection(client.restartJob(job.id))).toMatchObject({ status: 409, code: 'conflict' });
    const dry = await client.bulk({ action: 'cancel', where: { task: 'echo', status: 'queued' }, dryRun: true });
    expect(dry).toEqual({ matched: expect.any(Number), changed: 0, wouldChange: dry.matched });
    expect(dry.matched).toBeGreaterThanOrEqual(1);
  });

  test('tick runs due jobs; stats counts them; retryDead queues DEAD jobs again', async () => {
    const poisoned = await client.enqueue({ task: 'poison', payload: {} });
    const result = await client.tick();
    expect(result).toMatchObject({ claimed: expect.any(Number), done: expect.any(Number), dead: expect.any(Number) });
    expect(result.dead).toBeGreaterThanOrEqual(1);
    expect(await client.getJob(poisoned.id)).toMatchObject({ status: 'DEAD' });
    const stats = await client.stats();
    expect(stats.counts.DEAD).toBeGreaterThanOrEqual(1);
    expect(stats.byTask.poison).toMatchObject({ DEAD: 1 });
    expect(await client.retryDead({ task: 'poison' })).toBe(1);
    expect(await client.getJob(poisoned.id)).toMatchObject({ status: 'QUEUED' });
  });

  test('enqueueAndWait: 202 → finished false while the job waits; a finished job (a replay of its key) → finished true', async () => {
    const waiting = await client.enqueueAndWait({ task: 'echo', payload: { message: 'w' }, idempotencyKey: 'client-wait' }, { waitSeconds: 0.2 });
    expect(seen.at(-1)!.url).toBe('http://skiplock.test/v1/jobs?wait=0.2');
    expect(waiting).toMatchObject({ finished: false, job: { status: 'QUEUED' } });
    await client.tick();
    const done = await client.enqueueAndWait({ task: 'echo', payload: { message: 'w' }, idempotencyKey: 'client-wait' }, { waitSeconds: 1 });
    expect(done).toMatchObject({ finished: true, job: { id: waiting.job.id, status: 'DONE', result: { message: 'w' } } });
  });
});

describe('schedules', () => {
  test('putSchedule creates then replaces; getSchedule, listSchedules; deleteSchedule', async () => {
    const created = await client.putSchedule('client-nightly', { cron: '0 3 * * *', tz: 'Europe/Oslo', task: 'echo', payload: { message: 'n' } });
    expect(created).toMatchObject({ created: true, schedule: { name: 'client-nightly', source: 'dynamic', cron: '0 3 * * *', tz: 'Europe/Oslo' } });
    const replaced = await client.putSchedule('client-nightly', { every: '15m', task: 'echo', payload: { message: 'm' } });
    expect(replaced).toMatchObject({ created: false, schedule: { every: 900_000 } });
    expect(await client.getSchedule('client-nightly')).toMatchObject({ name: 'client-nightly', payload: { message: 'm' } });
    const page = await client.listSchedules({ prefix: 'client-' });
    expect(page.schedules.map((s) => s.name)).toEqual(['client-nightly']);
    expect(await client.deleteSchedule('client-nightly')).toBe(true);
    expect(await client.deleteSchedule('client-nightly')).toBe(false);
    expect(await client.getSchedule('client-nightly')).toBeUndefined();
  });
});

describe('errors carry the status and the API body', () => {
  test('invalid_payload (400) with its issues', async () => {
    const error = await rejection(client.enqueue({ task: 'echo', payload: { message: 42 } } as never));
    expect(error).toMatchObject({ status: 400, code: 'invalid_payload', message: expect.any(String) });
    expect(error.issues).toEqual([expect.objectContaining({ path: ['payload', 'message'] })]);
  });

  test('unknown_task (400)', async () => {
    expect(await rejection(client.enqueue({ task: 'nope', payload: {} } as never))).toMatchObject({ status: 400, code: 'unknown_task' });
  });

  test('unauthorized (401) with a wrong token', async () => {
    const wrong = createClient({ url: 'http://skiplock.test', token: 'wrong', fetch: (r) => t.app.fetch(r) });
    expect(await rejection(wrong.stats())).toMatchObject({ status: 401, code: 'unauthorized' });
  });

  test('an answer that is not the API’s still gives a SkiplockApiError with its status', async () => {
    const proxy = createClient({ url: 'http://x', token: 't', fetch: async () => new Response('<html>Bad gateway</html>', { status: 502 }) });
    expect(await rejection(proxy.stats())).toMatchObject({ status: 502, code: 'internal', message: 'HTTP 502: <html>Bad gateway</html>' });
  });
});

test('a URL with a path prefix keeps it', async () => {
  const requests: string[] = [];
  const mounted = createClient({
    url: 'https://example.com/skiplock/',
    token: 't',
    fetch: async (request) => {
      requests.push(request.url);
      return Response.json({ counts: {}, byTask: {}, oldestQueuedAgeMs: 0 });
    },
  });
  await mounted.stats();
  await mounted.getJob('a/b');
  expect(requests).toEqual(['https://example.com/skiplock/v1/stats', 'https://example.com/skiplock/v1/jobs/a%2Fb']);
});
