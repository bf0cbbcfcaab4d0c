/**
 * The schemas of the routes that operate the queue as a whole (src/http/routes/stats.ts, tick.ts,
 * tasks.ts, health.ts): counts and stats, a tick's result, tasks paused or active, health.
 */
import * as z from 'zod';
import { JOB_STATUSES } from '../../core/types.ts';
import { instant, storableText } from './shared.ts';

export const TaskNameParam = z.object({
  name: storableText.min(1).max(200).openapi({ param: { name: 'name', in: 'path' }, example: 'send-email' }),
});

const Counts = z
  .object(Object.fromEntries(JOB_STATUSES.map((status) => [status, z.number().int()])) as Record<(typeof JOB_STATUSES)[number], z.ZodNumber>)
  .openapi('CountsByStatus');

export const Stats = z
  .object({
    counts: Counts,
    byTask: z.record(z.string(), Counts),
    oldestQueuedAgeMs: z.number().openapi({ description: 'How long the longest-waiting due QUEUED job has waited; 0 when none.' }),
    depth: z
      .object({ due: z.number().int(), scheduled: z.number().int(), running: z.number().int(), waiting: z.number().int() })
      .openapi({ description: 'The queue\'s depth, exact: QUEUED jobs due now and not yet (runAt, delay, backoff, debounce), RUNNING, WAITING.' }),
    doneCount: z
      .enum(['exact', 'estimated'])
      .openapi({ description: '`estimated` when more than 10,000 jobs are DONE: counts.DONE (and each task\'s) is then estimated from the table\'s size; every other count is exact.' }),
    unrunnable: z
      .array(z.object({ task: z.string(), queued: z.number().int(), waiting: z.number().int() }))
      .openapi({ description: 'QUEUED or WAITING jobs of tasks this deployment does not register (renamed, removed, or another service’s), by task: nothing here can run them. A deployment knows its own tasks only: another service sharing the table may run them.' }),
  })
  .openapi('Stats');

export const TickResult = z
  .object({
    claimed: z.number().int(),
    done: z.number().int(),
    retried: z.number().int(),
    suspended: z.number().int().openapi({ description: 'Durable steps: jobs that went to sleep, to WAITING for their children, or yielded between steps (no attempt spent).' }),
    dead: z.number().int(),
    cancelled: z.number().int(),
    reaped: z.number().int(),
    fired: z.number().int(),
    staleWrites: z.number().int(),
  })
  .openapi('TickResult');

export const TaskInfo = z
  .object({
    name: z.string(),
    state: z.enum(['paused', 'active']),
    pausedAt: instant.nullable(),
    counts: Counts,
    debounced: z.number().int().openapi({ description: 'QUEUED jobs waiting on a debounce' }),
  })
  .openapi('Task');

export const TaskEnvelope = z.object({ task: TaskInfo }).openapi('TaskEnvelope');
export const TaskList = z.object({ tasks: z.array(TaskInfo) }).openapi('TaskList');

export const Health = z.object({ ok: z.boolean() }).openapi('Health');

export const DeepHealth = z
  .object({
    ok: z.boolean().openapi({ description: 'The database answered and its schema is the one this skiplock needs (or newer)' }),
    database: z.enum(['up', 'down']),
    schema: z
      .object({
        applied: z.number().int().nullable().openapi({ description: 'The newest migration the database has applied (null: none)' }),
        expected: z.number().int().openapi({ description: 'The newest migration this skiplock ships' }),
        missing: z.array(z.number().int()).openapi({ description: 'Bundled migrations the database lacks' }),
        state: z.enum(['current', 'missing', 'older', 'newer']),
      })
      .nullable()
      .openapi({ description: 'Null when the database did not answer' }),
  })
  .openapi('DeepHealth');
