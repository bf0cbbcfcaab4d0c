/**
 * Alarm mode (the SkiplockTicker Durable Object) in the real Workers runtime, with what local
 * workerd does not do stood in for by the fixture Worker (test/fixtures/alarm-worker/worker.ts):
 * Workers Free's cap of 50 subrequests per invocation, and an invocation that dies after claiming.
 * Issue 31, items 5 and 4 (Cloudflare): the Durable Object learns of due-now work and of the
 * leases a background tick takes whether or not that tick concludes; a job whose timeout exceeds
 * the HTTP tick's budget is the alarm's at once; a tick keeps a subrequest budget (a 300-job burst
 * under the Free cap: every job DONE once, no result lost); a key held busy elsewhere makes no spin.
 */
import { afterAll, beforeAll, expect, test } from 'vitest';
import { createSkiplock } from '../../src/runtime/skiplock.ts';
import { statement } from '../../src/store/sql.ts';
import { held } from '../fixtures/alarm-worker/tasks.ts';
import { startWorkerUnderTest, type WorkerUnderTest } from './worker-under-test.ts';
import { jobRow, untilStatus } from '../support/job-rows.ts';

const TOKEN = 'alarm-mode-test-token-0123456789';
const FREE_SUBREQUESTS = 50;
let under: WorkerUnderTest;

beforeAll(async () => {
  under = await startWorkerUnderTest(
    { API_TOKEN: TOKEN, TICK_POLL_INTERVAL_MS: '200', HTTP_TICK_BUDGET_MS: '21000', ALARM_TICK_BUDGET_MS: '40000', SUBREQUEST_CAP: String(FREE_SUBREQUESTS) },
    { config: 'test/fixtures/alarm-worker/wrangler.toml' },
  );
}, 120_000);
afterAll(() => under?.stop());

interface Invocation { kind: string; at: number; subrequests: number; refused: number }
const stats = async () => (await (await fetch(`${under.worker.url}/stats`)).json()) as { alarms: number; invocations: Invocation[] };
const post = async (path: string, body?: unknown) => {
  const response = await fetch(`${under.worker.url}${path}`, { method: 'POST', ...(body !== undefined && { body: JSON.stringify(body), headers: { 'content-type': 'application/json' } }) });
  expect(response.status, await response.clone().text()).toBe(200);
  return (await response.json()) as { id: string; ids: string[] };
};
const ms = (a: unknown, b: unknown) => (a as Date).getTime() - (b as Date).getTime();

const row = (id: string) => jobRow(under.db.sql, id);
const until = (id: string, status: string, timeoutMs = 8_000) => untilStatus(under.db.sql, id, status, timeoutMs, 100);

test('a job whose timeout exceeds the HTTP tick budget is claimed at once by the alarm (not an hour later)', async () => {
  // HTTP_TICK_BUDGET_MS 21 s: the background tick of the enqueue cannot give 30 s; the alarm's 40 s can (no task's own timeout needs the alarm: the example sleep's 20 s fits both).
  const { id } = await post('/enqueue', { task: 'echo', payload: { message: 'long' }, timeoutMs: 30_000 });
  const done = await until(id, 'DONE', 10_000);
  expect(done.status).toBe('DONE');
  console.log(`workerd, a job longer than the HTTP tick's budget: enqueue → start ${ms(done.started_at, done.created_at)} ms (the alarm)`);
}, 20_000);

test('an invocation that dies after claiming: the Durable Object was told at once, its alarm reaps and reruns the job', async () => {
  const { id } = await post('/die');
  // The dying invocation claimed it, and nothing more of it reaches anything.
  const running = await until(id, 'RUNNING', 5_000);
  expect(running.status).toBe('RUNNING');
  const done = await until(id, 'DONE', 40_000);
  expect(done, 'the job stayed RUNNING: the Durable Object never heard of its lease').toMatchObject({ status: 'DONE', attempts: 2 });
  console.log(`workerd, a job whose invocation died after claiming it: rerun ${ms(done.started_at, running.locked_until)} ms after its lease expired`);
}, 60_000);

test('a key held busy from another instance for 4 s: a handful of statements and alarms, not hundreds', async () => {
  // Another instance (this process, straight to PostgreSQL) holds key `busy` for 4 s.
  const other = createSkiplock({ sql: under.db.sql, tasks: [held], log: () => {}, retention: false });
  const holder = await other.enqueue({ task: 'held', payload: { k: 'busy', ms: 4_000 } });
  const holding = other.tick({ untilIdle: true, budgetMs: 10_000 });
  expect((await until(holder.id, 'RUNNING', 5_000)).status).toBe('RUNNING');
  const statementsBefore = under.proxy.sqlRequests();
  const alarmsBefore = (await stats()).alarms;
  const { id } = await post('/enqueue', { task: 'held', payload: { k: 'busy', ms: 0 } });
  await holding;
  const statements = under.proxy.sqlRequests() - statementsBefore;
  const alarms = (await stats()).alarms - alarmsBefore;
  console.log(`workerd, a key held busy by another instance for 4 s: ${statements} statements, ${alarms} alarms`);
  expect(statements).toBeLessThanOrEqual(10);
  expect(alarms).toBeLessThanOrEqual(3);
  // It starts by the holder's lease expiry at the latest (the holder's instance does not wake this deployment).
  const done = await until(id, 'DONE', 15_000);
  expect(done.status).toBe('DONE');
}, 40_000);

test('a 300-job burst from one route under the Free cap (50 subrequests per invocation): every job DONE once, no result lost', async () => {
  const started = Date.now();
  const { ids } = await post('/burst?n=300');
  expect(ids).toHaveLength(300);
  const deadline = Date.now() + 90_000;
  let rows: { status: string; attempts: number }[] = [];
  while (Date.now() < deadline) {
    rows = await under.db.sql.query(statement(`SELECT status, attempts FROM skiplock.job WHERE id = ANY($1::bigint[])`, [ids]));
    if (rows.every((r) => r.status === 'DONE')) break;
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  await new Promise((resolve) => setTimeout(resolve, 500));
  const invocations = (await stats()).invocations.filter((i) => i.at >= started - 1_000 && i.subrequests > 0);
  const done = rows.filter((r) => r.status === 'DONE').length;
  const lost = rows.filter((r) => Number(r.attempts) > 1).length;
  console.log(
    `workerd, 300-job burst under the Free cap: ${done} DONE, ${lost} results lost (run again), ` +
      `${invocations.length} invocations, subrequests per invocation ${invocations.map((i) => `${i.kind}:${i.subrequests}`).join(' ')}, ` +
      `refused ${invocations.reduce((n, i) => n + i.refused, 0)}`,
  );
  expect(done).toBe(300);
  expect(lost).toBe(0);
  for (const i of invocations) {
    expect(i.refused, i.kind).toBe(0);
    expect(i.subrequests, i.kind).toBeLessThanOrEqual(FREE_SUBREQUESTS);
  }
}, 120_000);
