/**
 * The opt-in Durable Object ticker (TICKER = "alarm") in workerd: without any cron invocation,
 * the alarm follows up work an enqueue left behind — here the retries of a `flaky` job, due
 * about a second after each failure.
 */
import { afterAll, beforeAll, expect, test } from 'vitest';
import type { WranglerDev } from '../../src/dev/wrangler-dev.ts';
import { statement } from '../../src/store/sql.ts';
import type { TestDb } from '../support/db.ts';
import { startWorkerUnderTest, type WorkerUnderTest } from './worker-under-test.ts';

const TOKEN = 'alarm-test-token';
let under: WorkerUnderTest;
let db: TestDb;
let worker: WranglerDev;

beforeAll(async () => {
  under = await startWorkerUnderTest({ API_TOKEN: TOKEN, TICKER: 'alarm', ALARM_TICK_BUDGET_MS: '12000' });
  ({ db, worker } = under);
});

afterAll(() => under?.stop());

test('the alarm ticks while there is work: a flaky job retries to DONE with no cron at all', async () => {
  const response = await fetch(`${worker.url}/v1/jobs`, {
    method: 'POST',
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify({ task: 'flaky', payload: { failTimes: 2 } }),
  });
  expect(response.status).toBe(201);
  const { job } = (await response.json()) as { job: { id: string } };

  const deadline = Date.now() + 15_000;
  let row: Record<string, unknown> | undefined;
  while (Date.now() < deadline) {
    [row] = await db.sql.query(statement(`SELECT status, attempts, result FROM skiplock.job WHERE id = $1`, [job.id]));
    if (row?.status === 'DONE') break;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  expect(row).toMatchObject({ status: 'DONE', attempts: 3, result: { attempts: 3 } });
});
