/**
 * A new user's first hour (issue 21, items 7, 8, 11, 12): a database not migrated yet, a missing
 * or short API_TOKEN, repeated wrong logins, and two dashboards mounted side by side. Each answers
 * clearly — 503 with the fix, never a 500 — and the user's own routes keep working.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { createWorker } from '../../src/cloudflare.ts';
import { SkiplockError } from '../../src/core/errors.ts';
import { createApp } from '../../src/http/app.ts';
import { mount } from '../../src/http/mount.ts';
import { z } from 'zod';
import { createSkiplock, defineTask } from '../../src/index.ts';
import { migrations } from '../../src/migrations.ts';
import { startNodeRunner } from '../../src/node.ts';
import { createPgDriver } from '../../src/pg.ts';
import { migrate } from '../../src/store/migrate.ts';
import { SCHEMA_VERSION } from '../../src/store/schema-version.ts';
import type { Sql } from '../../src/store/sql.ts';
import { statement } from '../../src/store/sql.ts';
import { exampleTasks } from '../../src/tasks/examples.ts';
import { createNextHandlers } from '../../src/vercel.ts';
import { createTestDb, type TestDb } from '../support/db.ts';
import { installVercelContext } from '../support/vercel-context.ts';
import { rememberContext } from '../../src/platform/cloudflare/wait-until.ts';

const TOKEN = 'first-hour-token-0123456789';
const auth = { authorization: `Bearer ${TOKEN}` };
const echo = { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify({ task: 'echo', payload: { message: 'hi' } }) };

/** The Sql port, counting statements by whether they read skiplock.migration. */
function counted(sql: Sql) {
  const seen = { schema: 0, all: 0 };
  const note = (text: string) => ((seen.all += 1), text.includes('skiplock.migration') && (seen.schema += 1));
  const port: Sql = { ...sql, query: (s) => (note(s.text), sql.query(s)), batch: (s) => (s.forEach((x) => note(x.text)), sql.batch(s)) };
  return { port, seen };
}

const appOn = (sql: Sql, logs: string[] = []) =>
  createApp({ skiplock: createSkiplock({ sql, tasks: exampleTasks, log: (_l, m) => logs.push(m) }), apiToken: TOKEN });

describe('item 7: an unmigrated database', () => {
  let db: TestDb;
  beforeAll(async () => (db = await createTestDb({ migrated: false })));
  afterAll(() => db?.drop());

  test('enqueue, the API and the dashboard answer 503 not_migrated naming the fix; /healthz answers 200 without a statement', async () => {
    const { port, seen } = counted(db.sql);
    const app = appOn(port);
    const health = await app.request('/healthz');
    expect([health.status, await health.json(), seen.all]).toEqual([200, { ok: true }, 0]);
    for (const [path, init] of [['/v1/jobs', echo], ['/v1/stats', { headers: auth }], ['/v1/jobs', { headers: auth }], ['/metrics', { headers: auth }]] as const) {
      const response = await app.request(path, init);
      const body = (await response.json()) as { error: { code: string; message: string } };
      expect([path, response.status, body.error.code]).toEqual([path, 503, 'not_migrated']);
      expect(body.error.message).toContain('npx skiplock migrate');
      expect(body.error.message).toContain('autoMigrate');
    }
  });

  test('the dashboard, signed in, shows a 503 page naming the fix', async () => {
    const app = appOn(db.sql);
    const login = await app.request('http://d.test/login', { method: 'POST', headers: { origin: 'http://d.test', 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams({ token: TOKEN, next: '/' }) });
    expect(login.status).toBe(303);
    const cookie = login.headers.getSetCookie()[0]!.split(';')[0]!;
    const page = await app.request('http://d.test/', { headers: { cookie } });
    expect(page.status).toBe(503);
    expect(await page.text()).toContain('npx skiplock migrate');
  });

  test('GET /healthz?deep=1 needs the token and reports the database and the schema version', async () => {
    const app = appOn(db.sql);
    expect((await app.request('/healthz?deep=1')).status).toBe(401);
    const deep = await app.request('/healthz?deep=1', { headers: auth });
    expect(deep.status).toBe(503);
    expect(await deep.json()).toMatchObject({ ok: false, database: 'up', schema: { applied: null, expected: SCHEMA_VERSION, state: 'missing' } });
  });

  test('the tick logs it once per instance, not once per poll', async () => {
    const logs: string[] = [];
    const quick = defineTask({ name: 'quick', timeoutMs: 100, payload: z.object({}), handler: async () => {} });
    const skiplock = createSkiplock({ sql: db.sql, tasks: [quick], log: (_level, message, fields) => logs.push(`${message} ${JSON.stringify(fields ?? {})}`) });
    for (let i = 0; i < 3; i++) await skiplock.tick({ budgetMs: 700, marginMs: 100, pollIntervalMs: 20 }).catch(() => {});
    const about = logs.filter((line) => line.includes('npx skiplock migrate'));
    expect(about, logs.join('\n')).toHaveLength(1);
    expect(logs.filter((line) => line.includes('does not exist'))).toEqual([]);
  });
});

describe('item 7: an older schema, then migrated', () => {
  let db: TestDb;
  beforeAll(async () => (db = await createTestDb({ migrated: false })));
  afterAll(() => db?.drop());

  test('names the missing migrations; once migrated, the same instance enqueues, checking the schema once', async () => {
    await migrate(db.sql, migrations.filter((m) => m.id <= 12));
    const { port, seen } = counted(db.sql);
    const app = appOn(port);
    const refused = await app.request('/v1/jobs', echo);
    expect(refused.status).toBe(503);
    const { error } = (await refused.json()) as { error: { code: string; message: string } };
    expect(error.code).toBe('not_migrated');
    expect(error.message).toMatch(/older .*applied up to 012, missing 013/);
    await migrate(db.sql, migrations);
    seen.schema = 0;
    for (let i = 0; i < 5; i++) expect((await app.request('/v1/jobs', echo)).status).toBe(201);
    expect(seen.schema).toBe(1);
    const deep = await app.request('/healthz?deep=1', { headers: auth });
    expect([deep.status, ((await deep.json()) as { schema: unknown }).schema]).toEqual([200, { applied: SCHEMA_VERSION, expected: SCHEMA_VERSION, missing: [], state: 'current' }]);
  });

  test('a table dropped behind a checked instance: its next statement answers not_migrated, not internal', async () => {
    const app = appOn(db.sql);
    expect((await app.request('/v1/jobs', echo)).status).toBe(201);
    await db.sql.query(statement('DROP TABLE skiplock.migration'));
    await db.sql.query(statement('ALTER TABLE skiplock.job_record RENAME TO job_gone'));
    const response = await app.request('/v1/jobs', echo);
    expect(response.status).toBe(503);
    expect(((await response.json()) as { error: { code: string } }).error.code).toBe('not_migrated');
  });

  test('a schema newer than this skiplock is served, with one warning', async () => {
    const newer = await createTestDb();
    try {
      await newer.sql.query(statement(`INSERT INTO skiplock.migration (id, name, checksum) VALUES (999, '999_future.sql', 'x')`));
      const logs: string[] = [];
      const app = appOn(newer.sql, logs);
      for (let i = 0; i < 2; i++) expect((await app.request('/v1/stats', { headers: auth })).status).toBe(200);
      expect(logs.filter((m) => m.includes('newer than this skiplock'))).toHaveLength(1);
      expect(await (await app.request('/healthz?deep=1', { headers: auth })).json()).toMatchObject({ ok: true, schema: { applied: 999, state: 'newer' } });
    } finally {
      await newer.drop();
    }
  });
});

describe('items 8 and 11: API_TOKEN missing or short', () => {
  let db: TestDb;
  beforeAll(async () => (db = await createTestDb()));
  afterAll(() => db?.drop());

  test('createApp refuses a missing or short secret with not_configured naming the variable', () => {
    const skiplock = createSkiplock({ sql: db.sql, tasks: exampleTasks });
    const refused = (options: Partial<Parameters<typeof createApp>[0]>) => {
      try {
        createApp({ skiplock, apiToken: TOKEN, ...options });
      } catch (error) {
        return error instanceof SkiplockError ? `${error.code}: ${error.message}` : String(error);
      }
      return 'accepted';
    };
    expect(refused({ apiToken: '' })).toMatch(/^not_configured: API_TOKEN is not set/);
    expect(refused({ apiToken: 'short-token' })).toMatch(/^not_configured: API_TOKEN is too short \(11 characters, at least 16\)/);
    expect(refused({ cronSecret: 'cron' })).toMatch(/^not_configured: CRON_SECRET is too short/);
    expect(refused({ metricsToken: 'metrics' })).toMatch(/^not_configured: METRICS_TOKEN is too short/);
    expect(refused({ apiToken: 'a'.repeat(16) })).toBe('accepted');
  });

  test('Cloudflare: skiplock routes answer 503 naming API_TOKEN and wrangler; the Worker and its queue keep working', async () => {
    // The enqueue's background tick is kept, and awaited before the test ends (the database is dropped after the describe).
    const kept: Promise<unknown>[] = [];
    rememberContext({ waitUntil: (work) => void kept.push(work) });
    const worker = createWorker({ tasks: exampleTasks, basePath: '/skiplock', sql: () => createPgDriver(db.url, { max: 2 }) });
    const env = { DATABASE_URL: db.url } as never;
    const userRoute = async (request: Request) => {
      if (worker.handles(request)) return worker.fetch(request, env, { waitUntil: (work: Promise<unknown>) => void kept.push(work), passThroughOnException: () => {} } as never);
      const job = await worker.skiplock(env).enqueue({ task: 'echo', payload: { message: 'signup' } });
      return Response.json({ job: job.id });
    };
    expect((await userRoute(new Request('http://w.test/signup'))).status).toBe(200);
    for (const path of ['/skiplock/healthz', '/skiplock/', '/skiplock/v1/jobs']) {
      const response = await userRoute(new Request(`http://w.test${path}`));
      const { error } = (await response.json()) as { error: { code: string; message: string } };
      expect([path, response.status, error.code]).toEqual([path, 503, 'not_configured']);
      expect(error.message).toContain('API_TOKEN is not set');
      expect(error.message).toContain('wrangler secret put API_TOKEN');
      expect(error.message).toContain('.dev.vars');
    }
    const short = await worker.fetch(new Request('http://w.test/skiplock/v1/jobs'), { DATABASE_URL: db.url, API_TOKEN: 'abc' } as never, { waitUntil: (work: Promise<unknown>) => void kept.push(work), passThroughOnException: () => {} } as never);
    expect(((await short.json()) as { error: { message: string } }).error.message).toMatch(/API_TOKEN is too short \(3 characters/);
    await Promise.allSettled(kept);
  });

  test('Next.js: the handlers answer 503 naming the Vercel settings and .env.local; skiplock() still enqueues', async () => {
    // Vercel's waitUntil, so that the enqueue's background tick is awaited before the test ends.
    const context = installVercelContext();
    const next = createNextHandlers({ tasks: exampleTasks, env: { DATABASE_URL: db.url }, sql: () => createPgDriver(db.url, { max: 2 }) });
    const response = await next.GET(new Request('http://n.test/api/skiplock/v1/stats'));
    const { error } = (await response.json()) as { error: { code: string; message: string } };
    expect([response.status, error.code]).toEqual([503, 'not_configured']);
    expect(error.message).toContain('Environment Variables');
    expect(error.message).toContain('.env.local');
    expect((await next.skiplock().enqueue({ task: 'echo', payload: { message: 'x' } })).status).toBe('QUEUED');
    await Promise.allSettled(context.kept);
    context.remove();
  });

  test('the Node runner serves 503 not_configured instead of failing', async () => {
    const skiplock = createSkiplock({ sql: db.sql, tasks: exampleTasks, log: () => {} });
    const runner = await startNodeRunner({ skiplock, apiToken: '', port: 0, drainMs: 100 });
    try {
      const response = await fetch(`${runner.url}/v1/stats`);
      expect(response.status).toBe(503);
      expect(((await response.json()) as { error: { code: string } }).error.code).toBe('not_configured');
    } finally {
      await runner.stop();
    }
  });

  test('METRICS_TOKEN opens /metrics only', async () => {
    const metricsToken = 'metrics-reader-0123456789';
    const app = createApp({ skiplock: createSkiplock({ sql: db.sql, tasks: exampleTasks }), apiToken: TOKEN, metricsToken });
    const as = { headers: { authorization: `Bearer ${metricsToken}` } };
    expect((await app.request('/metrics', as)).status).toBe(200);
    expect((await app.request('/metrics', { headers: auth })).status).toBe(200);
    for (const path of ['/v1/stats', '/v1/jobs', '/healthz?deep=1']) expect([path, (await app.request(path, as)).status]).toEqual([path, 401]);
  });
});

describe('item 11: repeated failed logins', () => {
  let db: TestDb;
  beforeAll(async () => (db = await createTestDb()));
  afterAll(() => db?.drop());

  test('after 5 failures from one client, attempts wait (429 with Retry-After), even with the right token; other clients are not held', async () => {
    // On Vercel the client is the last X-Forwarded-For hop (issue 30 item 10: the source is what the platform vouches for).
    const app = createApp({ skiplock: createSkiplock({ sql: db.sql, tasks: exampleTasks }), apiToken: TOKEN, platform: 'vercel' });
    const login = (token: string, ip: string) =>
      app.request('http://d.test/login', { method: 'POST', headers: { origin: 'http://d.test', 'content-type': 'application/x-www-form-urlencoded', 'x-forwarded-for': ip }, body: new URLSearchParams({ token, next: '/' }) });
    for (let i = 0; i < 5; i++) expect((await login('wrong-token', '10.0.0.1')).status).toBe(401);
    expect((await login('wrong-token', '10.0.0.1')).status).toBe(401); // the 6th is checked, and starts the waits
    const held = await login(TOKEN, '10.0.0.1');
    expect(held.status).toBe(429);
    expect(Number(held.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(await held.text()).toContain('Too many failed sign-ins');
    expect((await login(TOKEN, '10.0.0.2')).status).toBe(303);
  });
});

describe('item 12: the session cookie under a basePath', () => {
  let db: TestDb;
  beforeAll(async () => (db = await createTestDb()));
  afterAll(() => db?.drop());

  test("two mounted instances each scope their cookie to their own path, so neither overwrites the other's session", async () => {
    const skiplock = createSkiplock({ sql: db.sql, tasks: exampleTasks });
    const a = mount(createApp({ skiplock, apiToken: 'instance-a-token-0123456789' }), '/a');
    const b = mount(createApp({ skiplock, apiToken: 'instance-b-token-0123456789' }), '/b');
    const login = async (m: typeof a, prefix: string, token: string) => {
      const response = await m.fetch(new Request(`http://h.test${prefix}/login`, { method: 'POST', headers: { origin: 'http://h.test', 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams({ token }) }));
      expect(response.status).toBe(303);
      return response.headers.getSetCookie();
    };
    const [cookieA] = await login(a, '/a', 'instance-a-token-0123456789');
    const [cookieB] = await login(b, '/b', 'instance-b-token-0123456789');
    expect(cookieA).toMatch(/; Path=\/a(;|$)/);
    expect(cookieB).toMatch(/; Path=\/b(;|$)/);
    // A browser sends each cookie to its own mount only: both sessions stay valid at once.
    const page = (m: typeof a, prefix: string, cookie: string) => m.fetch(new Request(`http://h.test${prefix}/`, { headers: { cookie: cookie.split(';')[0]! } }));
    expect((await page(a, '/a', cookieA!)).status).toBe(200);
    expect((await page(b, '/b', cookieB!)).status).toBe(200);
    const logout = await a.fetch(new Request('http://h.test/a/login'));
    expect(logout.status).toBe(200);
  });
});

test('item 10: createPgDriver refuses a missing or malformed connection string when it is created', () => {
  expect(() => createPgDriver(undefined as unknown as string)).toThrow(/^createPgDriver: no connection string \(got undefined\): is DATABASE_URL set\?$/);
  expect(() => createPgDriver('garbage')).toThrow(/^createPgDriver: the connection string is not a PostgreSQL URL \(postgres:\/\/user:password@host:port\/database\): got "garbage"$/);
  expect(() => createPgDriver('postgres://u:p@localhost:1/x')).not.toThrow();
});
