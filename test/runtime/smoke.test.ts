import { afterAll, beforeAll, expect, test } from 'vitest';
import { z } from 'zod';
import { createSkiplock, defineTask } from '../../src/index.ts';
import { createTestDb, type TestDb } from '../support/db.ts';

let db: TestDb;
beforeAll(async () => (db = await createTestDb()));
afterAll(() => db.drop());

test('enqueue then tick runs the job', async () => {
  const echo = defineTask({ name: 'echo', payload: z.object({ message: z.string() }), handler: (p) => ({ message: p.message }) });
  const skiplock = createSkiplock({ sql: db.sql, tasks: [echo] });
  const job = await skiplock.enqueue({ task: 'echo', payload: { message: 'hi' } });
  expect(job.status).toBe('QUEUED');
  const result = await skiplock.tick({ untilIdle: true });
  expect(result).toMatchObject({ claimed: 1, done: 1 });
  const after = await skiplock.getJob(job.id);
  expect(after).toMatchObject({ status: 'DONE', result: { message: 'hi' }, attempts: 1 });
});
