/** /v1/schedules: list every schedule; create, replace or remove a dynamic one. */
import { createRoute } from '../zod-openapi.ts';
import * as z from 'zod';
import { SkiplockError } from '../../core/errors.ts';
import { scheduleToJson } from '../../runtime/schedules/index.ts';
import type { App, RouteDeps } from '../app-types.ts';
import { jsonBody } from '../json-body.ts';
import { ListSchedulesQuery, SCHEDULE_NAME_PATTERN, ScheduleEnvelope, ScheduleInput, ScheduleList } from '../schemas/schedules.ts';
import { bearerSecurity, errorResponses, jsonContent } from '../schemas/shared.ts';

const NameParam = z.object({
  // The pattern is the document's only: PUT refuses another name (400), GET and DELETE find none (404).
  name: z.string().openapi({ param: { name: 'name', in: 'path' }, description: '1–200 of [A-Za-z0-9_.:-]', example: 'nightly-report', pattern: SCHEDULE_NAME_PATTERN }),
});

const listRoute = createRoute({
  method: 'get',
  operationId: 'listSchedules',
  path: '/v1/schedules',
  summary: 'Every schedule: the static ones of this deployment and the dynamic ones, by name, one page at a time',
  tags: ['schedules'],
  security: bearerSecurity,
  request: { query: ListSchedulesQuery },
  responses: { 200: jsonContent(ScheduleList, 'One page; pass nextCursor as cursor for the next'), ...errorResponses(400, 401) },
});

const getRoute = createRoute({
  method: 'get',
  operationId: 'getSchedule',
  path: '/v1/schedules/{name}',
  summary: 'One schedule: a static one of this deployment or a dynamic one',
  tags: ['schedules'],
  security: bearerSecurity,
  request: { params: NameParam },
  responses: { 200: jsonContent(ScheduleEnvelope, 'The schedule'), ...errorResponses(401, 404) },
});

const putRoute = createRoute({
  method: 'put',
  operationId: 'putSchedule',
  path: '/v1/schedules/{name}',
  summary: 'Create or replace a dynamic schedule',
  description: 'Checked like an enqueue (the task must exist and the payload fit it). A replaced schedule keeps its history. A static schedule (defined in code) cannot be replaced: 409.',
  tags: ['schedules'],
  security: bearerSecurity,
  middleware: [jsonBody] as const,
  request: { params: NameParam, body: { required: true, content: { 'application/json': { schema: ScheduleInput } } } },
  responses: {
    201: jsonContent(ScheduleEnvelope, 'Created'),
    200: jsonContent(ScheduleEnvelope, 'Replaced'),
    ...errorResponses(400, 401, 409, 413),
  },
});

const deleteRoute = createRoute({
  method: 'delete',
  operationId: 'deleteSchedule',
  path: '/v1/schedules/{name}',
  summary: 'Remove a dynamic schedule (its jobs stay)',
  tags: ['schedules'],
  security: bearerSecurity,
  request: { params: NameParam },
  responses: {
    200: jsonContent(z.object({ name: z.string(), deleted: z.literal(true) }).openapi('ScheduleDeleted'), 'Removed'),
    ...errorResponses(401, 404, 409),
  },
});

export function registerScheduleRoutes(app: App, deps: RouteDeps): void {
  const { skiplock } = deps;
  app.openapi(listRoute, async (c) => {
    const page = await skiplock.listSchedules(c.req.valid('query'));
    return c.json({ schedules: page.schedules.map(scheduleToJson), nextCursor: page.nextCursor }, 200);
  });

  app.openapi(getRoute, async (c) => {
    const { name } = c.req.valid('param');
    const schedule = await skiplock.getSchedule(name);
    if (!schedule) throw new SkiplockError('not_found', `no schedule ${JSON.stringify(name)}`);
    return c.json({ schedule: scheduleToJson(schedule) }, 200);
  });

  app.openapi(putRoute, async (c) => {
    const { schedule, created } = await skiplock.putSchedule(c.req.valid('param').name, c.req.valid('json'));
    // Its first instant may come before anything else is due: a tick fires what is due now and, in
    // alarm mode, wakes the ticker, which plans its next alarm with this schedule in view.
    deps.startWork(c);
    return created ? c.json({ schedule: scheduleToJson(schedule) }, 201) : c.json({ schedule: scheduleToJson(schedule) }, 200);
  });

  app.openapi(deleteRoute, async (c) => {
    const { name } = c.req.valid('param');
    if (!(await skiplock.deleteSchedule(name))) throw new SkiplockError('not_found', `no dynamic schedule ${JSON.stringify(name)}`);
    return c.json({ name, deleted: true as const }, 200);
  });
}
