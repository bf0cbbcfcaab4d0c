/**
 * The Node runner hears what explicit ticks leave (issue 31, item 2) and never spins (item 4).
 * The runner's safety check is a week away (idleCheckMs), so nothing but the wake state starts a
 * job here: a retry an explicit tick leaves — `tick()`, `GET /v1/tick`, `enqueueAndWait({ tick })`
 * — starts at its instant only if the tick concluded into the runner's wake state. Jobs are
 * written by another instance on the same database (`other`, which the runner does not hear), so
 * that only the explicit tick knows of them.
 *
 * No spinning: a key held busy by a handler of another instance, and a conclusion statement that
 * fails, each cost the runner a handful of statements, not hundreds a second.
 */
import { afterAll, beforeAll, beforeEach, expect, test } from 'vitest';
import * as z from 'zod';
import { startNodeRunner, type NodeRunner } from '../../src/platform/node/runner.ts';
import { createSkiplock, type Skiplock } from '../../src/runtime/skiplock.ts';
import { defineTask } from '../../src/runtime/tasks/task.ts';
import type { Sql, Statement } from '../../src/store/sql.ts';
import { statement } from '../../src/store/sql.ts';
import { RETRY_BACKOFF } from '../../src/runtime/tick/retry-backoff.ts';
import { createTestDb, type TestDb } from '../support/db.ts';
import { jobRow, untilStatus } from '../support/job-rows.ts';
import { failsFirstTask } from '../support/fails-first.ts';

const API_TOKEN = 'node-explicit-token-0123456789';
const WEEK = 7 * 24 * 3600 * 1000;
const BACKOFF_MS = 2_500;

/** Fails its first attempt (per key), then succeeds; its retry is BACKOFF_MS later. */
const failsFirst = failsFirstTask(BACKOFF_MS);
const child = defineTask({ name: 'short-child', payload: z.object({}), timeoutMs: 1_000, handler: () => 'child done' });
/** Longer than the explicit ticks' budget below: only the runner's loop can claim it. */
const parent = defineTask({ name: 'long-parent', payload: z.object({}), timeoutMs: 20_000, handler: (_p, ctx) => ctx.invoke('c', 'short-child', {}) });
const held = defineTask({
  name: 'held-key',
  payload: z.object({ k: z.string(), holdMs: z.number() }),
  timeoutMs: 8_000,
  concurrency: { limit: 1, key: (p) => p.k },
  handler: ({ holdMs }) => new Promise((resolve) => setTimeout(resolve, holdMs, { held: holdMs })),
});
const tasks = [failsFirst, child, parent, held];

let db: TestDb;
let skiplock: Skiplock;
let other: Skiplock;
let runner: NodeRunner;
let statements = 0;
/** While set, the statement that concludes a tick ("when is anything next due") fails. */
let failConclusions = false;

beforeAll(async () => {
  db = await createTestDb();
  const count = (s: Statement) => {
    statements += 1;
    if (failConclusions && s.text.includes('next_claimable_at')) return Promise.reject(new Error('the conclusion failed (test)'));
    return db.sql.query(s);
  };
  const sql: Sql = { ...db.sql, query: count, batch: (s) => ((statements += 1), db.sql.batch(s)) } as Sql;
  skiplock = createSkiplock({ sql, tasks, log: () => {}, idleCheckMs: WEEK });
  other = createSkiplock({ sql: db.sql, tasks, log: () => {}, idleCheckMs: WEEK });
  runner = await startNodeRunner({ skiplock, apiToken: API_TOKEN, port: 0, tick: { marginMs: 200, pollIntervalMs: 50 }, requestTickBudgetMs: 1_500, log: () => {} });
});
afterAll(async () => {
  await runner?.stop();
  await db?.drop();
});
beforeEach(async () => {
  await db.emptyJobs();
  await quiet();
});

/** Until the runner's loop sleeps: no statement for a while. */
async function quiet(ms = 300) {
  for (let before = -1; before !== statements; ) {
    before = statements;
    await new Promise((resolve) => setTimeout(resolve, ms));
  }
}

const ms = (a: unknown, b: unknown) => (a as Date).getTime() - (b as Date).getTime();

/** The retry ran at its instant, by the runner's loop alone. */
async function retriedAtItsInstant(id: string) {
  const r = await until(id, 'DONE');
  expect(r.status).toBe('DONE');
  expect(r.attempts).toBe(2);
  const late = ms(r.started_at, r.run_at);
  expect(late).toBeGreaterThanOrEqual(0);
  expect(late).toBeLessThan(1_000);
  return late;
}

const row = (id: string) => jobRow(db.sql, id);
const until = (id: string, status: string, timeoutMs = 8_000) => untilStatus(db.sql, id, status, timeoutMs);

test("tick(): a retry it leaves runs at its instant, started by the runner's loop", async () => {
  const job = await other.enqueue({ task: 'fails-first', payload: { k: 'tick()' } });
  expect(await skiplock.tick({ untilIdle: true, marginMs: 200, pollIntervalMs: 20 })).toMatchObject({ claimed: 1, retried: 1 });
  console.log(`tick() → retry started ${await retriedAtItsInstant(job.id)} ms after its instant`);
});

test("GET /v1/tick: a retry it leaves runs at its instant, started by the runner's loop", async () => {
  const job = await other.enqueue({ task: 'fails-first', payload: { k: 'GET /v1/tick' } });
  const response = await fetch(`${runner.url}/v1/tick`, { headers: { authorization: `Bearer ${API_TOKEN}` } });
  expect(response.status).toBe(200);
  // The request's tick (1.5 s) ends before the retry (2.5 s) is due.
  expect(await response.json()).toMatchObject({ claimed: 1, retried: 1 });
  console.log(`GET /v1/tick → retry started ${await retriedAtItsInstant(job.id)} ms after its instant`);
});

test("enqueueAndWait({ tick }): the parent its tick wakes (too long for that tick) is run by the runner's loop", async () => {
  // A finished job whose idempotency key the enqueueAndWait below replays: a replay writes
  // nothing and reaches no hook, so only its tick's conclusion can tell the runner anything.
  const kept = await skiplock.enqueueWithResult({ task: 'short-child', payload: {}, idempotencyKey: 'kept' });
  expect((await until(kept.job.id, 'DONE')).status).toBe('DONE');
  // The parent WAITING for a child the runner does not know is due: its task paused by the
  // runner, resumed by the other instance.
  await skiplock.pauseTask('short-child');
  const job = await skiplock.enqueue({ task: 'long-parent', payload: {} });
  expect((await until(job.id, 'WAITING')).status).toBe('WAITING');
  await quiet(); // the loop's tick has ended
  await other.resumeTask('short-child');
  await quiet();
  const waited = await skiplock.enqueueAndWait(
    { task: 'short-child', payload: {}, idempotencyKey: 'kept' },
    { timeoutMs: 0, tick: { budgetMs: 5_000, marginMs: 200, pollIntervalMs: 20 } },
  );
  expect(waited.created).toBe(false);
  expect(await waited.tick).toMatchObject({ claimed: 1, done: 1 }); // the child; the parent's 20 s timeout does not fit
  const r = await until(job.id, 'DONE');
  expect(r.status).toBe('DONE');
});

// Issue 31, item 4: a key at its concurrency limit, its only slot held by a handler of another
// instance for 4 s, while the runner has a job due on that key.
test('a key held busy by another instance for 4 s: the runner makes a handful of statements, not hundreds', async () => {
  const holder = await other.enqueue({ task: 'held-key', payload: { k: 'busy', holdMs: 4_000 } });
  const holding = other.tick({ untilIdle: true, budgetMs: 20_000, marginMs: 200, pollIntervalMs: 50 });
  expect((await until(holder.id, 'RUNNING')).status).toBe('RUNNING');
  statements = 0;
  const started = Date.now();
  const waiting = await skiplock.enqueue({ task: 'held-key', payload: { k: 'busy', holdMs: 0 } }); // heard: the loop wakes, finds the key full
  await until(holder.id, 'DONE', 10_000);
  const spent = statements;
  console.log(`key held elsewhere for ${Date.now() - started} ms: ${spent} statements from the runner`);
  expect(spent).toBeLessThanOrEqual(8);
  await holding; // the holder's tick, polling until idle, takes the freed key's job
  expect((await until(waiting.id, 'DONE')).status).toBe('DONE');
});

test('a conclusion statement that fails: the loop backs off, a few statements a second, and recovers', async () => {
  failConclusions = true;
  statements = 0;
  const job = await skiplock.enqueue({ task: 'short-child', payload: {} });
  await new Promise((resolve) => setTimeout(resolve, 2_000));
  const spent = statements;
  failConclusions = false;
  console.log(`conclusion failing for 2 s: ${spent} statements from the runner`);
  expect(spent).toBeLessThanOrEqual(30);
  expect((await until(job.id, 'DONE')).status).toBe('DONE');
  // Recovered: it concludes again, and then sleeps. Quiet for longer than a backoff step can be
  // (a wait of the retry's schedule is not the end of the retries).
  await quiet(RETRY_BACKOFF.maxMs + 200);
  const before = statements;
  await new Promise((resolve) => setTimeout(resolve, 1_500));
  expect(statements - before).toBe(0);
});
