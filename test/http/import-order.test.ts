// The library's zod schemas are built first here, before @hono/zod-openapi extends zod:
// the app must not depend on them having `.openapi` (it clones them).
import { createSkiplock } from '../../src/runtime/skiplock.ts';
import { exampleTasks } from '../../src/tasks/examples.ts';
import { createApp } from '../../src/http/app.ts';
import { expect, test } from 'vitest';
import { createPgDriver } from '../../src/store/drivers/pg.ts';

test('createApp works whatever was imported first, and documents the enqueue schema', async () => {
  const sql = createPgDriver('postgres://unused@127.0.0.1:1/unused');
  const app = createApp({ skiplock: createSkiplock({ sql, tasks: exampleTasks }), apiToken: 'import-order-token-0123456789' });
  const doc = (await (await app.request('/openapi.json')).json()) as any;
  expect(doc.components.schemas.EnqueueInput.required).toEqual(['task']);
  expect(doc.components.schemas.ScheduleInput.required).toEqual(['task']);
  await sql.close();
});
