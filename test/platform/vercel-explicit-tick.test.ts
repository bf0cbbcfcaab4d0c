/**
 * Vercel: an explicit tick (`GET /v1/tick` with API_TOKEN, `skiplock().tick()`) concludes into
 * the wake state in the Runtime Cache (issue 31, item 2), through the handler's exported `fetch`
 * on a real database reached with the Neon HTTP driver. A retry it leaves lowers the state to the
 * retry's instant, so the next cron (or a timer) knows it is due, instead of the state saying
 * "nothing due" until the safety check.
 */
import { afterAll, beforeAll, expect, test } from 'vitest';
import { z } from 'zod';
import { startNeonProxy, type NeonProxy } from '../../src/dev/neon-proxy.ts';
import { createVercelHandler, type VercelHandler } from '../../src/platform/vercel/index.ts';
import { createSkiplock, type Skiplock } from '../../src/runtime/skiplock.ts';
import { defineTask } from '../../src/runtime/tasks/task.ts';
import type { WakeState } from '../../src/runtime/wake/state.ts';
import { createNeonHttpDriver } from '../../src/store/drivers/neon-http.ts';
import { statement } from '../../src/store/sql.ts';
import { createTestDb, type TestDb } from '../support/db.ts';
import { installVercelContext } from '../support/vercel-context.ts';
import { failsFirstTask } from '../support/fails-first.ts';

const CRON_SECRET = 'vercel-cron-secret-0123456789';
const API_TOKEN = 'vercel-api-token-0123456789';
const ORIGIN = 'https://skiplock-explicit.vercel.app';
const HOUR = 3_600_000;

/** Fails its first attempt; the retry is 10 s later, after the explicit tick's 3 s budget. */
const failsFirst = failsFirstTask(10_000);

let db: TestDb;
let proxy: NeonProxy;
let handler: VercelHandler;
/** Another instance on the same database, which the deployment does not hear. */
let other: Skiplock;
const context = installVercelContext();
const { kept, cache } = context;

beforeAll(async () => {
  db = await createTestDb();
  proxy = await startNeonProxy();
  handler = createVercelHandler({
    tasks: [failsFirst],
    sql: (env) => createNeonHttpDriver(env.DATABASE_URL!, { fetchEndpoint: env.NEON_FETCH_ENDPOINT! }),
    env: { DATABASE_URL: db.url, NEON_FETCH_ENDPOINT: proxy.fetchEndpoint, API_TOKEN, CRON_SECRET, TICK_BUDGET_MS: '3000', TICK_POLL_INTERVAL_MS: '100', IDLE_CHECK_MS: String(HOUR) },
  });
  other = createSkiplock({ sql: db.sql, tasks: [failsFirst], log: () => {} });
});

afterAll(async () => {
  await Promise.allSettled(kept);
  context.remove();
  await proxy?.close();
  await db?.drop();
});

const state = () => {
  expect(cache.size).toBe(1);
  return [...cache.values()][0] as WakeState;
};

async function runAt(id: string): Promise<number> {
  const [row] = await db.sql.query<{ run_at: Date; status: string }>(statement(`SELECT run_at, status FROM skiplock.job WHERE id = $1`, [id]));
  expect(row!.status).toBe('QUEUED');
  return row!.run_at.getTime();
}

/** The cron's first request: the state is checked, nothing due. */
async function checked() {
  const response = await handler.fetch(new Request(`${ORIGIN}/v1/tick`, { headers: { authorization: `Bearer ${CRON_SECRET}` } }));
  expect(response.status).toBe(200);
  expect(state()).toMatchObject({ dueAt: null });
}

test("GET /v1/tick with API_TOKEN: a retry it leaves lowers the Runtime Cache's state to the retry's instant", async () => {
  await checked();
  const job = await other.enqueue({ task: 'fails-first', payload: { k: 'GET' } });
  const response = await handler.fetch(new Request(`${ORIGIN}/v1/tick`, { headers: { authorization: `Bearer ${API_TOKEN}` } }));
  expect(response.status).toBe(200);
  expect(await response.json()).toMatchObject({ claimed: 1, retried: 1 });
  const at = await runAt(job.id);
  // The database's instant on the platform's clock: the same machine here, within the statement's trip.
  expect(Math.abs(state().dueAt! - at)).toBeLessThan(1_000);
});

test("skiplock().tick(): a retry it leaves lowers the Runtime Cache's state to the retry's instant", async () => {
  await db.emptyJobs();
  cache.clear();
  await checked();
  const job = await other.enqueue({ task: 'fails-first', payload: { k: 'tick()' } });
  expect(await handler.skiplock().tick({ untilIdle: true, pollIntervalMs: 20 })).toMatchObject({ claimed: 1, retried: 1 });
  const at = await runAt(job.id);
  expect(Math.abs(state().dueAt! - at)).toBeLessThan(1_000);
});
