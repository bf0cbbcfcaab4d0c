/**
 * When ticks run, in the real Workers runtime (wrangler dev) with the Durable Object ticker (the
 * default) and NO cron fired: a job enqueued from the user's own route starts at once; a delayed
 * one starts at its runAt; a job a killed invocation held is reaped when its lease expires; and a
 * cron invocation with nothing due makes no statement (counted at the local Neon proxy) and
 * returns at once. Start latencies are printed (the machine is shared and loaded).
 */
import { afterAll, beforeAll, expect, test } from 'vitest';
import { statement } from '../../src/store/sql.ts';
import { startWorkerUnderTest, type WorkerUnderTest } from './worker-under-test.ts';
import { jobRow, untilStatus } from '../support/job-rows.ts';

const TOKEN = 'wake-test-token-0123456789';
let under: WorkerUnderTest;

beforeAll(async () => {
  under = await startWorkerUnderTest({ API_TOKEN: TOKEN, TICK_POLL_INTERVAL_MS: '200' }, { config: 'test/fixtures/wake-worker/wrangler.toml' });
}, 120_000);
afterAll(() => under?.stop());

const signup = async (delayMs = 0) => {
  const response = await fetch(`${under.worker.url}/signup?delayMs=${delayMs}`, { method: 'POST' });
  expect(response.status).toBe(200);
  return ((await response.json()) as { id: string }).id;
};

const ms = (a: unknown, b: unknown) => (a as Date).getTime() - (b as Date).getTime();
const percentile = (values: number[], p: number) => [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.ceil(p * values.length) - 1)]!;

const row = (id: string) => jobRow(under.db.sql, id);
const until = (id: string, status: string, timeoutMs = 8_000) => untilStatus(under.db.sql, id, status, timeoutMs);

test("a job enqueued from the user's own route starts at once, with no cron (enqueue → start, database clock)", async () => {
  const starts: number[] = [];
  for (let i = 0; i < 30; i += 1) {
    const done = await until(await signup(), 'DONE', 10_000);
    expect(done.status).toBe('DONE');
    starts.push(ms(done.started_at, done.created_at));
  }
  console.log(`workerd, user's route → start: p50 ${percentile(starts, 0.5)} ms, p99 ${percentile(starts, 0.99)} ms, max ${Math.max(...starts)} ms (n=${starts.length})`);
  expect(percentile(starts, 0.5)).toBeLessThan(1_000);
});

test('a delayed job starts at its runAt, with no cron (the Durable Object alarm)', async () => {
  const late: number[] = [];
  for (const delayMs of [1_500, 2_500, 3_000]) {
    const done = await until(await signup(delayMs), 'DONE', 15_000);
    expect(done.status).toBe('DONE');
    late.push(ms(done.started_at, done.run_at));
  }
  console.log(`workerd, delayed job start − runAt: ${late.join(', ')} ms`);
  for (const l of late) expect(l).toBeGreaterThanOrEqual(0);
  expect(Math.max(...late)).toBeLessThan(2_000);
});

test("a killed invocation's job is reaped when its lease expires, with no cron (the lease-expiry wake instant)", async () => {
  // What a killed invocation leaves: a RUNNING row whose lease no one renews (it expires in 3 s).
  const [held] = await under.db.sql.query(
    statement(`INSERT INTO skiplock.job (task, payload, status, attempts, locked_by, locked_until, started_at)
               VALUES ('echo', '{"message":"orphan"}', 'RUNNING', 1, 'killed-invocation', now() + interval '3 seconds', now()) RETURNING id::text, locked_until`),
  );
  // Its claim was a write behind the Worker's back here: one wake makes the ticker look (once).
  expect((await fetch(`${under.worker.url}/v1/wake`, { method: 'POST', headers: { authorization: `Bearer ${TOKEN}` } })).status).toBe(202);
  const done = await until(String(held!.id), 'DONE', 15_000);
  expect(done.status).toBe('DONE');
  const afterExpiry = ms(done.started_at, held!.locked_until);
  console.log(`workerd, reaped and restarted ${afterExpiry} ms after its lease expired`);
  expect(afterExpiry).toBeGreaterThanOrEqual(0);
  expect(afterExpiry).toBeLessThan(2_000);
});

test('an idle cron invocation makes no statement and returns at once', async () => {
  await new Promise((resolve) => setTimeout(resolve, 1_000)); // let the last alarm settle
  const before = under.proxy.sqlRequests();
  const started = performance.now();
  const response = await fetch(`${under.worker.url}/__scheduled?cron=*+*+*+*+*`);
  await response.text();
  const took = performance.now() - started;
  await new Promise((resolve) => setTimeout(resolve, 500));
  console.log(`workerd, idle cron invocation: ${under.proxy.sqlRequests() - before} statements, ${took.toFixed(0)} ms`);
  expect(under.proxy.sqlRequests() - before).toBe(0);
  expect(took).toBeLessThan(1_000);
});
