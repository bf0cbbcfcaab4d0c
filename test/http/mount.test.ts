/**
 * The HTTP app under a path prefix, as users compose it with their own routes: mounted in a hono
 * app (skiplock/hono), behind createWorker's basePath (skiplock/cloudflare) and in a Next.js
 * catch-all route (skiplock/vercel). The API, the tick route with CRON_SECRET and the dashboard's
 * links all work under the prefix; the user's own paths stay theirs.
 */
import { Hono } from 'hono';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { createWorker } from '../../src/cloudflare.ts';
import { createSkiplockApp } from '../../src/hono.ts';
import { createSkiplock } from '../../src/index.ts';
import { createPgDriver } from '../../src/pg.ts';
import { exampleTasks } from '../../src/tasks/examples.ts';
import { createNextHandlers } from '../../src/vercel.ts';
import { createTestDb, type TestDb } from '../support/db.ts';

const TOKEN = 'mount-test-token-0123456789';
const CRON = 'mount-test-cron-0123456789';
const auth = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };
const echo = (message: string) => JSON.stringify({ task: 'echo', payload: { message } });

let db: TestDb;
beforeAll(async () => (db = await createTestDb()));
afterAll(() => db?.drop());

describe('skiplock/hono: parent.route(prefix, createSkiplockApp(...))', () => {
  let parent: Hono;
  beforeAll(() => {
    const skiplock = createSkiplock({ sql: createPgDriver(db.url, { max: 2 }), tasks: exampleTasks, log: () => {} });
    parent = new Hono();
    parent.get('/', (c) => c.text('my home page'));
    parent.route('/jobs-api', createSkiplockApp({ skiplock, apiToken: TOKEN, cronSecret: CRON, tick: { budgetMs: 3_000 } }));
  });

  test('the API answers under the prefix, and the parent keeps its own routes', async () => {
    const created = await parent.request('/jobs-api/v1/jobs', { method: 'POST', headers: auth, body: echo('mounted') });
    expect(created.status).toBe(201);
    const { job } = (await created.json()) as { job: { id: string } };
    expect((await parent.request(`/jobs-api/v1/jobs/${job.id}`, { headers: auth })).status).toBe(200);
    expect((await parent.request('/jobs-api/healthz')).status).toBe(200);
    expect(await (await parent.request('/')).text()).toBe('my home page');
    expect((await parent.request('/v1/jobs', { headers: auth })).status).toBe(404);
    expect((await parent.request('/jobs-api/v1/jobs', { method: 'POST', body: echo('no token') })).status).toBe(401);
  });

  test('the tick route accepts CRON_SECRET under the prefix', async () => {
    const ticked = await parent.request('/jobs-api/v1/tick', { headers: { authorization: `Bearer ${CRON}` } });
    expect(ticked.status).toBe(200);
    expect(await ticked.json()).toMatchObject({ claimed: expect.any(Number) });
  });

  test("the dashboard's redirects, links and forms follow the prefix", async () => {
    const overview = await parent.request('/jobs-api/');
    expect(overview.status).toBe(303);
    expect(overview.headers.get('location')).toBe('/jobs-api/login?next=%2F');
    const login = await parent.request('/jobs-api/login');
    const html = await login.text();
    expect(html).toContain('action="/jobs-api/login"');
    expect(html).not.toMatch(/(href|action|src)="\/(?!jobs-api\/|\/)/);
    const signedIn = await parent.request('/jobs-api/login', {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', origin: 'http://localhost' },
      body: new URLSearchParams({ token: TOKEN, next: '/jobs' }).toString(),
    });
    expect(signedIn.status).toBe(303);
    expect(signedIn.headers.get('location')).toBe('/jobs-api/jobs');
    const cookie = signedIn.headers.get('set-cookie')!.split(';')[0]!;
    const jobs = await parent.request('/jobs-api/jobs', { headers: { cookie } });
    expect(jobs.status).toBe(200);
    const page = await jobs.text();
    expect(page).toMatch(/href="\/jobs-api\/jobs\/\d+"/);
    expect(page).not.toMatch(/(href|action|src)="\/(?!jobs-api\/|\/)/);
  });
});

describe('skiplock/cloudflare: createWorker({ basePath })', () => {
  const worker = createWorker({ tasks: exampleTasks, basePath: '/skiplock', sql: (env) => createPgDriver(env.DATABASE_URL, { max: 2 }), log: () => {} });
  const waited: Promise<unknown>[] = [];
  const ctx = { waitUntil: (work: Promise<unknown>) => void waited.push(work), passThroughOnException() {}, props: {} };
  const env = () => ({ DATABASE_URL: db.url, API_TOKEN: TOKEN, CRON_SECRET: CRON, TICK_BUDGET_MS: '15000', HTTP_TICK_BUDGET_MS: '15000' });

  test('handles() tells its paths from the rest; fetch serves them, with the tick after an enqueue', async () => {
    expect(worker.handles(new Request('https://w.example/skiplock/v1/jobs'))).toBe(true);
    expect(worker.handles(new Request('https://w.example/skiplock'))).toBe(true);
    expect(worker.handles(new Request('https://w.example/skiplocker'))).toBe(false);
    expect(worker.handles(new Request('https://w.example/'))).toBe(false);
    const e = env();
    const created = await worker.fetch(new Request('https://w.example/skiplock/v1/jobs', { method: 'POST', headers: auth, body: echo('worker') }), e, ctx);
    expect(created.status).toBe(201);
    const { job } = (await created.json()) as { job: { id: string } };
    await Promise.all(waited);
    expect(await worker.skiplock(e).getJob(job.id)).toMatchObject({ status: 'DONE', result: { message: 'worker' } });
    expect((await worker.fetch(new Request('https://w.example/elsewhere'), e, ctx)).status).toBe(404);
  });
});

describe('skiplock/vercel: createNextHandlers in app/api/skiplock/[...path]/route.ts', () => {
  let GET: (request: Request) => Promise<Response>;
  let POST: (request: Request) => Promise<Response>;
  beforeAll(() => {
    ({ GET, POST } = createNextHandlers({
      tasks: exampleTasks,
      log: () => {},
      sql: (env) => createPgDriver(env.DATABASE_URL!, { max: 2 }),
      env: { DATABASE_URL: db.url, API_TOKEN: TOKEN, CRON_SECRET: CRON, TICK_BUDGET_MS: '3000' },
    }));
  });

  test('the route handlers serve the API and the cron tick under /api/skiplock (the default basePath)', async () => {
    // A 3 s tick claims jobs of at most 2 s: a longer timeout is refused at enqueue (maxJobTimeoutMs).
    const tooLong = await POST(new Request('https://app.example/api/skiplock/v1/jobs', { method: 'POST', headers: auth, body: echo('next') }));
    expect(tooLong.status).toBe(400);
    const body = JSON.stringify({ task: 'echo', payload: { message: 'next' }, timeoutMs: 2_000 });
    const created = await POST(new Request('https://app.example/api/skiplock/v1/jobs', { method: 'POST', headers: auth, body }));
    expect(created.status).toBe(201);
    const cron = await GET(new Request('https://app.example/api/skiplock/v1/tick', { headers: { authorization: `Bearer ${CRON}` } }));
    expect(cron.status).toBe(200);
    expect((await GET(new Request('https://app.example/api/skiplock/v1/tick'))).status).toBe(401);
    expect((await GET(new Request('https://app.example/api/other'))).status).toBe(404);
  });
});
