/** The schemas of /v1/schedules (src/http/routes/schedules.ts). */
import * as z from 'zod';
import { JOB_STATUSES } from '../../core/types.ts';
import { SCHEDULE_NAME } from '../../core/schedule.ts';
import { scheduleInputSchema } from '../../runtime/schedules/index.ts';
import { SCHEDULE_LIST_LIMIT } from '../../runtime/schedules/index.ts';
import { anyJson, instant, nullableText, pageLimit } from './shared.ts';

/** A schedule's name (SCHEDULE_NAME) as a pattern, for the document. */
export const SCHEDULE_NAME_PATTERN = SCHEDULE_NAME.source;

export const ListSchedulesQuery = z.strictObject({
  limit: pageLimit(SCHEDULE_LIST_LIMIT),
  cursor: z.string().regex(SCHEDULE_NAME).optional().openapi({ description: '`nextCursor` of the previous page.' }),
  prefix: z.string().regex(SCHEDULE_NAME).optional().openapi({ description: 'Only names that start with it (plain characters, no patterns).', example: 'tenant-42-' }),
});

/** clone() first: see shared.ts. */
export const ScheduleInput = scheduleInputSchema.clone().openapi('ScheduleInput', {
  description: 'Give exactly one of cron, every, daily (`tz` does not apply to every). The payload is checked against the task’s schema.',
  example: { cron: '0 3 * * *', tz: 'Europe/Oslo', task: 'echo', payload: { message: 'nightly' } },
  // Checked when the timing is parsed (parseTiming), not by the zod schema: stated here for tools.
  oneOf: [{ required: ['cron'] }, { required: ['every'] }, { required: ['daily'] }],
  not: { required: ['every', 'tz'] },
});

export const Schedule = z
  .object({
    name: z.string(),
    source: z.enum(['static', 'dynamic']),
    cron: nullableText,
    every: z.number().int().nullable().openapi({ description: 'interval in ms' }),
    daily: z.array(z.string()).nullable(),
    tz: z.string(),
    task: z.string(),
    payload: anyJson(),
    enabled: z.boolean(),
    catchUp: z.enum(['all', 'latest', 'none']),
    overlap: z.enum(['allow', 'skip']),
    maxFiringsPerTick: z.number().int(),
    nextRunAt: instant.nullable(),
    lastFiredAt: instant.nullable(),
    lastScheduledFor: instant.nullable(),
    lastJobId: nullableText,
    lastStatus: z.enum(JOB_STATUSES).nullable(),
    state: anyJson().openapi({ description: 'The recurring state its runs read (ctx.state) and replace (ctx.setState); null until one sets it' }),
  })
  .openapi('Schedule');

export const ScheduleEnvelope = z.object({ schedule: Schedule }).openapi('ScheduleEnvelope');
export const ScheduleList = z
  .object({ schedules: z.array(Schedule), nextCursor: z.string().nullable().openapi({ description: 'null on the last page' }) })
  .openapi('ScheduleList');
