/**
 * Every writing call of the typed client starts its job (issue 31, item 1): the client goes
 * through the HTTP API, whose writes reach the deployment's wake state. Against the Node runner
 * over real HTTP, its safety check a week away (idleCheckMs): nothing but the wake state starts a
 * job here. Every method of the client is sorted below; a new one fails the first test until it
 * is sorted (and, if it writes due work, given a scenario).
 */
import { afterAll, beforeAll, beforeEach, expect, test } from 'vitest';
import * as z from 'zod';
import { createClient, type SkiplockClient } from '../../src/client/index.ts';
import { startNodeRunner, type NodeRunner } from '../../src/platform/node/runner.ts';
import { createSkiplock, type Skiplock } from '../../src/runtime/skiplock.ts';
import { defineTask } from '../../src/runtime/tasks/task.ts';
import { statement, type Sql, type Statement } from '../../src/store/sql.ts';
import { createTestDb, type TestDb } from '../support/db.ts';
import { failsFirstTask } from '../support/fails-first.ts';

const API_TOKEN = 'client-starts-token-0123456789';
const WEEK = 7 * 24 * 3600 * 1000;

const ok = defineTask({ name: 'ok', payload: z.object({ n: z.number().optional() }), timeoutMs: 1_000, handler: () => ({ ok: true }) });
/** DEAD at its first attempt until its key is allowed. */
const allowed = new Set<string>();
const dies = defineTask({
  name: 'dies',
  payload: z.object({ k: z.string() }),
  timeoutMs: 1_000,
  maxAttempts: 1,
  handler: ({ k }) => {
    if (!allowed.has(k)) throw new Error('not yet');
    return { ok: true };
  },
});
const pausedChild = defineTask({ name: 'paused-child', payload: z.object({}), timeoutMs: 1_000, handler: () => 'ran' });
const parent = defineTask({
  name: 'parent',
  payload: z.object({}),
  timeoutMs: 1_000,
  handler: async (_p, ctx) => ctx.invoke('child', 'paused-child', {}).catch(() => 'child cancelled'),
});
const waiter = defineTask({ name: 'waiter', payload: z.object({}), timeoutMs: 1_000, handler: async (_p, ctx) => ctx.waitForEvent('paid', { event: 'client.paid' }) });
const onPaid = defineTask({ name: 'on-paid', payload: z.unknown(), on: 'client.paid', timeoutMs: 1_000, handler: () => 'started by the event' });
const failsFirst = failsFirstTask(2_500);
const tasks = [ok, dies, pausedChild, parent, waiter, onPaid, failsFirst];

let db: TestDb;
let skiplock: Skiplock;
let runner: NodeRunner;
let client: SkiplockClient;

let statements = 0;

beforeAll(async () => {
  db = await createTestDb();
  const sql = { ...db.sql, query: (s: Statement) => ((statements += 1), db.sql.query(s)) } as Sql;
  skiplock = createSkiplock({ sql, tasks, log: () => {}, idleCheckMs: WEEK });
  runner = await startNodeRunner({ skiplock, apiToken: API_TOKEN, port: 0, tick: { marginMs: 200, pollIntervalMs: 50 }, requestTickBudgetMs: 1_500, log: () => {} });
  client = createClient({ url: runner.url, token: API_TOKEN });
});
afterAll(async () => {
  await runner?.stop();
  await db?.drop();
});
beforeEach(async () => {
  await db.emptyJobs();
  // Until the runner's loop sleeps: a wake-up planned by the last scenario must not run this one's job.
  for (let before = -1; before !== statements; ) {
    before = statements;
    await new Promise((resolve) => setTimeout(resolve, 1_200));
  }
});

async function status(id: string, want: string, timeoutMs = 8_000): Promise<string> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const [r] = await db.sql.query<{ status: string }>(statement(`SELECT status FROM skiplock.job WHERE id = $1`, [id]));
    if (r!.status === want || Date.now() > deadline) return r!.status;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
const done = async (...ids: string[]) => {
  for (const id of ids) expect(await status(id, 'DONE'), `job ${id}`).toBe('DONE');
};
/** A job of `dies` run DEAD by the runner, then allowed to succeed: what a retry or restart starts. */
async function deadJob(k: string): Promise<string> {
  const job = await skiplock.enqueue({ task: 'dies', payload: { k } });
  expect(await status(job.id, 'DEAD')).toBe('DEAD');
  allowed.add(k);
  return job.id;
}

/** Each writing call that creates or moves due work, and how to see its job start. */
const STARTS_ITS_JOB: Record<string, () => Promise<void>> = {
  enqueue: async () => done((await client.enqueue({ task: 'ok', payload: {} })).id),
  enqueueWithResult: async () => done((await client.enqueueWithResult({ task: 'ok', payload: {} })).job.id),
  enqueueAndWait: async () => expect(await client.enqueueAndWait({ task: 'ok', payload: {} }, { waitSeconds: 8 })).toMatchObject({ finished: true, job: { status: 'DONE' } }),
  enqueueBatch: async () => done(...(await client.enqueueBatch([{ task: 'ok', payload: { n: 1 } }, { task: 'ok', payload: { n: 2 }, delayMs: 300 }])).map((j) => j.id)),
  retryJob: async () => done((await client.retryJob(await deadJob('retryJob'))).id),
  retryDead: async () => {
    const id = await deadJob('retryDead');
    expect(await client.retryDead({ task: 'dies' })).toBe(1);
    await done(id);
  },
  restartJob: async () => done((await client.restartJob(await deadJob('restartJob'))).id),
  bulk: async () => {
    const id = await deadJob('bulk');
    expect(await client.bulk({ action: 'retry', where: { task: 'dies', status: 'DEAD' } })).toMatchObject({ changed: 1 });
    await done(id);
  },
  // A cancelled child ends its WAITING parent's wait: the parent runs again.
  cancelJob: async () => {
    await skiplock.pauseTask('paused-child');
    try {
      const job = await client.enqueue({ task: 'parent', payload: {} });
      expect(await status(job.id, 'WAITING')).toBe('WAITING');
      const [childJob] = (await client.listJobs({ task: 'paused-child', status: 'QUEUED' })).jobs;
      expect(await client.cancelJob(childJob!.id)).toMatchObject({ outcome: 'cancelled' });
      await done(job.id);
    } finally {
      await skiplock.resumeTask('paused-child');
    }
  },
  // Wakes a waitForEvent, and starts the task defined with on: its name.
  sendEvent: async () => {
    const job = await client.enqueue({ task: 'waiter', payload: {} });
    expect(await status(job.id, 'WAITING')).toBe('WAITING');
    expect(await client.sendEvent({ name: 'client.paid', data: { ok: true } })).toMatchObject({ woken: 1, started: 1 });
    await done(job.id);
    const [started] = (await client.listJobs({ task: 'on-paid' })).jobs;
    await done(started!.id);
  },
  putSchedule: async () => {
    expect(await client.putSchedule('client-every-second', { every: 1_000, task: 'ok', payload: {} })).toMatchObject({ created: true });
    try {
      const deadline = Date.now() + 8_000;
      let fired: { id: string } | undefined;
      while (!fired && Date.now() < deadline) {
        [fired] = (await client.listJobs({ task: 'ok' })).jobs;
        if (!fired) await new Promise((resolve) => setTimeout(resolve, 50));
      }
      expect(fired, 'a firing of the schedule').toBeDefined();
      await done(fired!.id);
    } finally {
      await client.deleteSchedule('client-every-second');
    }
  },
};
/**
 * A tick (POST /v1/tick): it runs what is due itself, and concludes into the wake state — a retry
 * it leaves (the job written behind the deployment's back, so that only the tick knows it) starts
 * at its instant without another call.
 */
const TICKS: Record<string, () => Promise<void>> = {
  tick: async () => {
    const other = createSkiplock({ sql: db.sql, tasks, log: () => {} });
    const job = await other.enqueue({ task: 'fails-first', payload: { k: 'client.tick' } });
    expect(await client.tick()).toMatchObject({ claimed: 1, retried: 1 });
    await done(job.id);
    const [r] = await db.sql.query<{ started_at: Date; run_at: Date }>(statement(`SELECT started_at, run_at FROM skiplock.job WHERE id = $1`, [job.id]));
    expect(r!.started_at.getTime() - r!.run_at.getTime()).toBeLessThan(1_000); // at its instant
  },
};
/** Writes that make nothing due. */
const WRITES_NOTHING_DUE = ['deleteSchedule'];
const READS = ['getJob', 'getSchedule', 'listEvents', 'listJobs', 'listSchedules', 'stats', 'streamJob'];

test('every method of the typed client is sorted by what it does to due work', () => {
  const sorted = [...Object.keys(STARTS_ITS_JOB), ...Object.keys(TICKS), ...WRITES_NOTHING_DUE, ...READS];
  expect(new Set(sorted).size).toBe(sorted.length);
  expect(Object.keys(client).sort()).toEqual(sorted.sort());
});

for (const [name, scenario] of Object.entries({ ...STARTS_ITS_JOB, ...TICKS })) {
  test(`${name}: its job starts with nothing else to wake the runner`, scenario, 20_000);
}
