/**
 * The client's types: typed by the tasks (a wrong task name or payload does not compile — the
 * `@ts-expect-error` lines are checked by `tsc --noEmit`), and its JSON types are the API's
 * response schemas.
 */
import { describe, expectTypeOf, test } from 'vitest';
import { z } from 'zod';
import { createClient, type ClientEnqueueInput, type JobDetailJson, type JobJson, type ScheduleJson, type StatsJson, type TickResultJson } from '../../src/client/index.ts';
import type { Job, JobDetail } from '../../src/http/schemas/jobs.ts';
import type { Stats, TickResult } from '../../src/http/schemas/operations.ts';
import type { Schedule } from '../../src/http/schemas/schedules.ts';
import { defineTask } from '../../src/runtime/tasks/task.ts';
import { exampleTasks } from '../../src/tasks/examples.ts';

const tasks = [
  defineTask({ name: 'echo', payload: z.object({ message: z.string() }), handler: ({ message }) => message }),
  defineTask({ name: 'resize', payload: z.object({ url: z.string().url(), width: z.number().int().default(800) }), handler: () => {} }),
  defineTask({ name: 'cleanup', payload: z.object({}), handler: () => {} }),
];

/** Never called: it only has to compile. */
function typedCalls(client: ReturnType<typeof createClient<typeof tasks>>) {
  void client.enqueue({ task: 'echo', payload: { message: 'hi' }, delayMs: 1000 });
  void client.enqueue({ task: 'resize', payload: { url: 'https://x' } }); // width has a default: optional on input
  void client.enqueue({ task: 'cleanup' }); // a payload schema that accepts {} may be left out
  void client.enqueueBatch([{ task: 'echo', payload: { message: 'a' } }, { task: 'cleanup', payload: {} }]);
  void client.putSchedule('nightly', { cron: '0 3 * * *', task: 'echo', payload: { message: 'n' } });

  // @ts-expect-error a task that is not in the set
  void client.enqueue({ task: 'ecko', payload: { message: 'hi' } });
  // @ts-expect-error a payload of the wrong type
  void client.enqueue({ task: 'echo', payload: { message: 42 } });
  // @ts-expect-error a payload missing a required field
  void client.enqueue({ task: 'echo', payload: {} });
  // @ts-expect-error the payload may not be left out when the schema needs fields
  void client.enqueue({ task: 'echo' });
  // @ts-expect-error another task's payload
  void client.enqueue({ task: 'resize', payload: { message: 'hi' } });
  // @ts-expect-error an option that does not exist
  void client.enqueue({ task: 'cleanup', payload: {}, delay: 5 });
  // @ts-expect-error a wrong payload in a batch
  void client.enqueueBatch([{ task: 'echo', payload: { message: 'a' } }, { task: 'resize', payload: {} }]);
  // @ts-expect-error a schedule of an unknown task
  void client.putSchedule('nightly', { cron: '0 3 * * *', task: 'nope', payload: {} });
}
void typedCalls;

describe('types', () => {
  test('typed by the tasks: the enqueue input is the union of each task with its payload', () => {
    expectTypeOf<ClientEnqueueInput<typeof tasks>['task']>().toEqualTypeOf<'echo' | 'resize' | 'cleanup'>();
    expectTypeOf<Extract<ClientEnqueueInput<typeof tasks>, { task: 'echo' }>['payload']>().toEqualTypeOf<{ message: string }>();
  });

  test('untyped (no type argument): any task name, any payload', () => {
    const client = createClient({ url: 'http://x', token: 't' });
    expectTypeOf(client.enqueue).parameter(0).toMatchTypeOf<{ task: string; payload?: unknown }>();
  });

  test('typed by the same array the deployment registers (the bundled examples)', () => {
    expectTypeOf<ClientEnqueueInput<typeof exampleTasks>['task']>().toEqualTypeOf<'echo' | 'sleep' | 'flaky' | 'poison' | 'notify' | 'signup-workflow' | 'await-payment'>();
  });

  test('the JSON types are what the API documents (src/http/schemas/)', () => {
    expectTypeOf<JobJson>().toEqualTypeOf<z.infer<typeof Job>>();
    expectTypeOf<JobDetailJson>().toEqualTypeOf<z.infer<typeof JobDetail>>();
    expectTypeOf<ScheduleJson>().toEqualTypeOf<z.infer<typeof Schedule>>();
    expectTypeOf<StatsJson>().toEqualTypeOf<z.infer<typeof Stats>>();
    expectTypeOf<TickResultJson>().toEqualTypeOf<z.infer<typeof TickResult>>();
  });
});
