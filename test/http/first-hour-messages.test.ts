/**
 * Messages that point the right way (issue 30, item 16): not_migrated names what a Worker (and a
 * Next.js or Vercel) project does, not only createSkiplock; an own route's enqueue before the
 * migration rejects with a typed error it can catch; the overview does not say "All clear" while
 * due jobs wait with nothing running.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { createWorker } from '../../src/cloudflare.ts';
import { NotMigratedError, SkiplockError } from '../../src/index.ts';
import { createPgDriver } from '../../src/pg.ts';
import { exampleTasks } from '../../src/tasks/examples.ts';
import { createTestDb, type TestDb } from '../support/db.ts';
import { claimAsRunning, getPage, logIn } from './dashboard-support.ts';
import { createTestApp, type TestApp } from './helpers.ts';

describe('an unmigrated database', () => {
  let db: TestDb;
  beforeAll(async () => (db = await createTestDb({ migrated: false })));
  afterAll(() => db?.drop());

  test("a Worker's own route: its enqueue rejects with NotMigratedError, whose message says what a createWorker project does", async () => {
    const worker = createWorker({ tasks: exampleTasks, basePath: '/skiplock', sql: () => createPgDriver(db.url, { max: 2 }) });
    const env = { DATABASE_URL: db.url, API_TOKEN: 'first-hour-token-0123456789' } as never;
    const error = await worker.skiplock(env).enqueue({ task: 'echo', payload: { message: 'signup' } }).then(() => undefined, (e: unknown) => e);
    expect(error).toBeInstanceOf(NotMigratedError);
    expect(error).toBeInstanceOf(SkiplockError);
    const { code, message } = error as NotMigratedError;
    expect(code).toBe('not_migrated');
    expect(message).toContain('npx skiplock migrate');
    expect(message).toMatch(/autoMigrate: migrations.*createWorker/);
    // The queue's own routes answer 503 with the same message.
    const response = await worker.fetch(new Request('http://w.test/skiplock/v1/stats', { headers: { authorization: 'Bearer first-hour-token-0123456789' } }), env, { waitUntil: () => {}, passThroughOnException: () => {} } as never);
    expect(response.status).toBe(503);
    expect(((await response.json()) as { error: { message: string } }).error.message).toContain('createWorker');
  });
});

describe('the overview while due jobs wait', () => {
  let t: TestApp;
  let session: string;
  beforeAll(async () => {
    t = await createTestApp();
    session = await logIn(t);
  });
  afterAll(() => t?.close());

  const overview = async () => (await getPage(t, '/', session)).text();

  test('a due job waiting with nothing running is not "All clear": it says they wait, for how long, and when this instance last ticked', async () => {
    expect(await overview()).toContain('All clear');
    await t.skiplock.enqueue({ task: 'echo', payload: { message: 'due' }, runAt: new Date(Date.now() - 40_000).toISOString() });
    const before = await overview();
    expect(before).not.toContain('All clear');
    expect(before).not.toContain('keeping up');
    expect(before).toContain('Due jobs are waiting');
    expect(before).toMatch(/the oldest for (3\d|4\d|5\d) s, and no job is running/);
    expect(before).toContain('No tick has run in this instance since it started');
    expect(before).toContain('waiting for a tick');

    await t.skiplock.pauseTask('echo');
    await t.skiplock.tick({ untilIdle: true, budgetMs: 5_000 });
    const after = await overview();
    expect(after).toMatch(/This instance last ticked \d+ (ms|s) ago/);
    await t.skiplock.resumeTask('echo');
  });

  test('with a job running, ticks are running: no waiting alert', async () => {
    await t.db.emptyJobs();
    await t.skiplock.enqueue({ task: 'echo', payload: { message: 'running' } });
    expect(await claimAsRunning(t.skiplock, 'echo')).toHaveLength(1);
    await t.skiplock.enqueue({ task: 'echo', payload: { message: 'due' }, runAt: new Date(Date.now() - 10_000).toISOString() });
    expect(await overview()).not.toContain('Due jobs are waiting');
  });
});
