/**
 * Typed enqueue: `tsc --noEmit` (npm test's first step) checks this file. Each `@ts-expect-error`
 * line must be a type error — if the typing loosened, tsc reports the directive as unused.
 */
import { expect, test } from 'vitest';
import { z } from 'zod';
import { createSkiplock, defineTask, type EnqueueInputOf, type Skiplock, type TaskMap, type TaskName, type TaskPayload } from '../../src/index.ts';
import type { Sql } from '../../src/store/sql.ts';

const sendEmail = defineTask({
  name: 'send-email',
  payload: z.object({ to: z.email(), subject: z.string().default('hello') }),
  handler: (payload) => {
    // The handler gets the schema's output type: the default is filled in.
    const subject: string = payload.subject;
    // @ts-expect-error not in the schema
    void payload.cc;
    return { sent: subject };
  },
});
const cleanup = defineTask({ name: 'cleanup', payload: z.object({}), handler: () => undefined });
const tasks = [sendEmail, cleanup];

function typeChecks(skiplock: Skiplock<typeof tasks>) {
  void skiplock.enqueue({ task: 'send-email', payload: { to: 'a@example.com' } }); // subject has a default: optional on input
  void skiplock.enqueue({ task: 'send-email', payload: { to: 'a@example.com', subject: 'hi' }, delayMs: 1000, idempotencyKey: 'k' });
  void skiplock.enqueue({ task: 'cleanup' }); // payload may be omitted when {} fits
  void skiplock.enqueueBatch([{ task: 'cleanup', payload: {} }, { task: 'send-email', payload: { to: 'b@example.com' } }]);
  const statement: { text: string; values: readonly unknown[] } = skiplock.enqueueStatement({ task: 'cleanup' });
  void statement;

  // @ts-expect-error unknown task name
  void skiplock.enqueue({ task: 'send-emial', payload: { to: 'a@example.com' } });
  // @ts-expect-error the payload misses a required field
  void skiplock.enqueue({ task: 'send-email', payload: {} });
  // @ts-expect-error the payload is required when {} does not fit the schema
  void skiplock.enqueue({ task: 'send-email' });
  // @ts-expect-error a field of the wrong type
  void skiplock.enqueue({ task: 'send-email', payload: { to: 42 } });
  // @ts-expect-error the payload of another task
  void skiplock.enqueueStatement({ task: 'cleanup', payload: { to: 'a@example.com' } });
  // @ts-expect-error wrong in a batch too
  void skiplock.enqueueBatch([{ task: 'cleanup' }, { task: 'nope' }]);
  // @ts-expect-error an unknown enqueue option
  void skiplock.enqueue({ task: 'cleanup', delay: 5 });

  // The helper types the typed client uses.
  const name: TaskName<typeof tasks> = 'cleanup';
  // @ts-expect-error not a task name
  const wrongName: TaskName<typeof tasks> = 'other';
  const payload: TaskPayload<typeof tasks, 'send-email'> = { to: 'c@example.com' };
  const input: EnqueueInputOf<typeof tasks> = { task: 'send-email', payload };
  const byName: TaskMap<typeof tasks>['cleanup'] = cleanup;
  void [name, wrongName, input, byName];

  // Untyped tasks: any name and payload compile; the run-time check still applies.
  const loose = skiplock as Skiplock;
  void loose.enqueue({ task: 'anything', payload: 1 });
}

test('createSkiplock infers the task list without `as const`', () => {
  const sql: Sql = { query: async () => [], batch: async () => [], close: async () => {} };
  const skiplock = createSkiplock({ sql, tasks });
  const typed: Skiplock<typeof tasks> = skiplock;
  // @ts-expect-error inferred from the config
  void (() => skiplock.enqueue({ task: 'unknown' }));
  expect(typeof typeChecks).toBe('function');
  expect(typed.enqueueStatement({ task: 'send-email', payload: { to: 'a@example.com' } }).text).toContain('INSERT INTO skiplock.job');
  expect(() => typed.enqueueStatement({ task: 'send-email', payload: { to: 'not an address' } })).toThrow(/invalid payload/);
});
