/** /v1/events: send an event, list events; /v1/callbacks/{token}: complete a ctx.createCallback (issue 24). */
import type { MiddlewareHandler } from 'hono';
import { createRoute } from '../zod-openapi.ts';
import type { Skiplock } from '../../runtime/skiplock.ts';
import { SkiplockError } from '../../core/errors.ts';
import { eventToJson } from '../../runtime/events/index.ts';
import type { App, RouteDeps } from '../app-types.ts';
import { jsonBody } from '../json-body.ts';
import {
  CallbackBody,
  CallbackResult,
  CallbackTokenParam,
  EventPage,
  ListEventsQuery,
  SendEventInput,
  SendEventResult,
} from '../schemas/events.ts';
import { bearerSecurity, errorResponses, IdempotencyHeader, jsonContent } from '../schemas/shared.ts';

const sendRoute = createRoute({
  method: 'post',
  operationId: 'sendEvent',
  path: '/v1/events',
  summary: 'Send an event',
  description:
    'One transaction: stores the event, completes every ctx.waitForEvent waiting for it (their jobs are due at once), starts one job of each task defined with `on:` its name, and cancels the jobs whose cancelOn it matches. A wait reached later still finds it: no event is lost. The same idempotency key again answers the first send (200) and writes nothing.',
  tags: ['events'],
  security: bearerSecurity,
  middleware: [jsonBody] as const,
  request: { headers: IdempotencyHeader, body: { required: true, content: { 'application/json': { schema: SendEventInput } } } },
  responses: {
    201: jsonContent(SendEventResult, 'Stored'),
    200: jsonContent(SendEventResult, 'Replay: an event with this idempotency key exists; its result is returned, nothing is written'),
    ...errorResponses(400, 401, 413),
  },
});

const listRoute = createRoute({
  method: 'get',
  operationId: 'listEvents',
  path: '/v1/events',
  summary: 'Stored events, newest first, one page at a time',
  description: 'Kept for the retention window (default 7 days).',
  tags: ['events'],
  security: bearerSecurity,
  request: { query: ListEventsQuery },
  responses: { 200: jsonContent(EventPage, 'One page; pass nextCursor as cursor for the next'), ...errorResponses(400, 401) },
});

const callbackRoute = createRoute({
  method: 'post',
  operationId: 'completeCallback',
  path: '/v1/callbacks/{token}',
  summary: 'Complete a callback (ctx.createCallback)',
  description:
    'No bearer token: the URL’s HMAC-signed token is the credential. The JSON body becomes the `data` of the waiting ctx.waitForCallback, and its job is due at once. A callback completes once: a wrong token is 404, a used (or timed-out) one 409, and neither writes anything.',
  tags: ['events'],
  security: [],
  middleware: [jsonBody] as const,
  request: { params: CallbackTokenParam, body: { required: true, content: { 'application/json': { schema: CallbackBody } } } },
  responses: { 200: jsonContent(CallbackResult, 'Completed'), ...errorResponses(400, 404, 409, 413) },
});

export function registerEventRoutes(app: App, deps: RouteDeps): void {
  const { skiplock } = deps;

  app.openapi(sendRoute, async (c) => {
    const input = c.req.valid('json');
    const headerKey = c.req.valid('header')['idempotency-key'];
    if (headerKey !== undefined && input.idempotencyKey !== undefined && headerKey !== input.idempotencyKey)
      throw new SkiplockError('invalid_request', 'the Idempotency-Key header and the idempotencyKey field differ', [
        { path: ['idempotencyKey'], message: 'differs from the Idempotency-Key header' },
      ]);
    const { created, ...result } = await skiplock.sendEvent({ ...input, idempotencyKey: input.idempotencyKey ?? headerKey });
    // Woken and started jobs are due now: run them in this invocation's background (fast resume).
    if (created && (result.woken > 0 || result.started > 0)) deps.startWork(c);
    return c.json(result, created ? 201 : 200);
  });

  app.openapi(listRoute, async (c) => {
    const page = await skiplock.listEvents(c.req.valid('query'));
    return c.json({ events: page.events.map(eventToJson), nextCursor: page.nextCursor }, 200);
  });

  app.openapi(callbackRoute, async (c) => {
    // The whole body is the callback's data.
    const data: unknown = c.req.valid('json');
    const outcome = await skiplock.completeCallback(c.req.valid('param').token, data);
    if (outcome === 'unknown') throw new SkiplockError('not_found', 'no such callback');
    if (outcome === 'used') throw new SkiplockError('conflict', 'this callback was already completed (or timed out)');
    deps.startWork(c);
    return c.json({ ok: true }, 200);
  });
}

/**
 * A callback URL's token, checked before anything reads the body (app.ts registers it ahead of the
 * body limit and the JSON parser): a stranger's POST is 404 whatever it sends, and never makes the
 * deployment buffer or parse a megabyte.
 */
export function requireCallbackToken(skiplock: Skiplock): MiddlewareHandler {
  return async (c, next) => {
    const token = c.req.param('token');
    if (token === undefined || token.length > 1000 || !(await skiplock.isCallbackToken(token))) throw new SkiplockError('not_found', 'no such callback');
    await next();
  };
}
