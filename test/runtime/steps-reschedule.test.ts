/**
 * Issue 21 item 4: a new payload for a job that has recorded steps would mix step results
 * computed from the old payload with the new one; rescheduleJob (PATCH /v1/jobs/:id) refuses it
 * with conflict and writes nothing. Its time and priority can still change.
 */
import { afterAll, beforeAll, expect, test } from 'vitest';
import { z } from 'zod';
import { createSkiplock, defineTask, SkiplockError } from '../../src/index.ts';
import { rescheduleJob } from '../../src/store/admin.ts';
import { createTestDb, type TestDb } from '../support/db.ts';

let db: TestDb;
beforeAll(async () => {
  db = await createTestDb();
});
afterAll(() => db.drop());

const quiet = () => {};
const T0 = new Date('2026-06-01T12:00:00.000Z');

const billing = defineTask({
  name: 'billing',
  payload: z.object({ charge: z.number() }),
  handler: async (p, ctx) => {
    const charged = await ctx.step('charge', () => p.charge);
    await ctx.sleep('wait', 60_000);
    return { receiptFor: charged };
  },
});

test('a payload change of a job with steps: 409 conflict saying why, nothing written; time and priority still change', async () => {
  const sk = createSkiplock({ sql: db.sql, tasks: [billing], now: () => T0, log: quiet });
  const job = await sk.enqueue({ task: 'billing', payload: { charge: 10 } });
  await sk.tick({ untilIdle: true });
  const sleeping = (await sk.getJob(job.id))!;
  expect(sleeping).toMatchObject({ status: 'WAITING', stepCount: 2 });

  const error = await sk.rescheduleJob(job.id, { payload: { charge: 999 } }).catch((e: unknown) => e);
  expect(error).toBeInstanceOf(SkiplockError);
  expect(error).toMatchObject({ code: 'conflict', message: expect.stringMatching(/recorded steps.*new payload/) });
  expect((await sk.getJob(job.id))!).toMatchObject({ payload: { charge: 10 }, updatedAt: sleeping.updatedAt });

  // The statement refuses it by itself too (steps recorded after the task was read).
  const [row] = await db.sql.query(rescheduleJob({ now: T0, id: job.id, runAt: null, delayMs: null, payload: { charge: 999 }, hasPayload: true, priority: null }));
  expect(row).toMatchObject({ applied: false });
  expect((await sk.getJob(job.id))!.payload).toEqual({ charge: 10 });

  expect(await sk.rescheduleJob(job.id, { priority: 5 })).toMatchObject({ priority: 5, payload: { charge: 10 } });
});
