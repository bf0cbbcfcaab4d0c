/** The schemas of /v1/events and /v1/callbacks (src/http/routes/events.ts, issue 24). */
import * as z from 'zod';
import { eventNameSchema } from '../../runtime/events/index.ts';
import { EVENT_LIMITS, EVENT_LIST_LIMIT, sendEventInputSchema } from '../../runtime/events/index.ts';
import { anyJson, instant, pageLimit, storableText } from './shared.ts';

/** clone() first: see shared.ts. */
export const SendEventInput = sendEventInputSchema.clone().openapi('SendEventInput', {
  description: `An event: \`name\`, optional \`key\` and \`data\` (JSON, at most ${EVENT_LIMITS.maxDataBytes} bytes), optional \`idempotencyKey\` (the Idempotency-Key header works too).`,
  example: { name: 'order.paid', key: 'o-42', data: { amount: 1200 } },
});

export const SendEventResult = z
  .object({
    id: z.string(),
    woken: z.number().int().openapi({ description: 'Waiting jobs it woke (ctx.waitForEvent)' }),
    started: z.number().int().openapi({ description: 'Jobs it started (tasks defined with `on:` its name)' }),
    pending: z.number().int().openapi({
      description: 'Tasks with `on:` its name that another deployment registered and this one does not define: their jobs are started by that deployment at its next tick (once). 0 when nothing else subscribes.',
    }),
    cancelled: z.number().int().openapi({ description: 'Jobs it cancelled or asked to stop (cancelOn); 0 for a replay' }),
    refused: z.array(z.object({ task: z.string(), message: z.string() })).openapi({ description: '`on:` tasks whose payload schema refused the data' }),
  })
  .openapi('SendEventResult');

export const EventRecord = z
  .object({
    id: z.string(),
    name: z.string(),
    key: z.string().nullable(),
    data: anyJson().openapi({ description: 'null when sent without data' }),
    idempotencyKey: z.string().nullable(),
    createdAt: instant,
    woken: z.number().int(),
    started: z.number().int().openapi({ description: '`on:` jobs started: by the send, and since by the deployments that define the tasks' }),
    pending: z.number().int().openapi({ description: '`on:` jobs still to be started by the deployment that registered their task' }),
    cancelled: z.number().int(),
    refused: z.array(z.object({ task: z.string(), message: z.string() })),
  })
  .openapi('Event');

export const EventPage = z
  .object({ events: z.array(EventRecord), nextCursor: z.string().nullable().openapi({ description: 'null on the last page' }) })
  .openapi('EventPage');

export const ListEventsQuery = z.strictObject({
  name: eventNameSchema.optional(),
  key: storableText.min(1).max(255).optional(),
  limit: pageLimit(EVENT_LIST_LIMIT),
  cursor: z.string().max(100).optional().openapi({ description: '`nextCursor` of the previous page.' }),
});

export const CallbackTokenParam = z.object({
  token: z.string().max(1000).openapi({ param: { name: 'token', in: 'path' }, description: 'The last segment of a URL from ctx.createCallback' }),
});

export const CallbackBody = z.unknown().openapi('CallbackBody', { description: 'Any JSON: the callback’s `data`', example: { approved: true } });

export const CallbackResult = z.object({ ok: z.boolean() }).openapi('CallbackResult');
