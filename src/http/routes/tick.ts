/**
 * GET or POST /v1/tick: one tick now. Platform crons call it (Vercel sends
 * `Authorization: Bearer $CRON_SECRET` with a GET); so can a person or a deploy script.
 * POST /v1/wake: work written behind the deployment's back may be due at `at` (default now).
 */
import * as z from 'zod';
import { SkiplockError } from '../../core/errors.ts';
import { storableInstant, toIssues } from '../../runtime/tasks/index.ts';
import { createRoute } from '../zod-openapi.ts';
import type { App, RouteDeps } from '../app-types.ts';
import { TickResult } from '../schemas/operations.ts';
import { bearerSecurity, errorResponses, jsonContent } from '../schemas/shared.ts';

const tickRoute = (method: 'get' | 'post') =>
  createRoute({
    method,
    // GET is what Vercel's cron sends; POST is for people and scripts.
    operationId: method === 'post' ? 'tick' : 'tickViaGet',
    path: '/v1/tick',
    summary: 'Run one tick now',
    description: 'Fires due schedules, reaps expired leases, claims and runs due jobs, and answers once nothing due is left and nothing it claimed runs (it does not wait for work due later). Accepts API_TOKEN or CRON_SECRET.',
    tags: ['operations'],
    security: [{ bearer: [] }, { cronSecret: [] }],
    responses: { 200: jsonContent(TickResult, 'What the tick did'), ...errorResponses(401) },
  });

const WakeBody = z.strictObject({ at: storableInstant.optional() });
const WakeAccepted = z.object({ at: z.string().openapi({ description: 'The instant the deployment will look at the database by (ISO-8601)' }) }).openapi('WakeAccepted');

const wakeRoute = createRoute({
  method: 'post',
  operationId: 'wake',
  path: '/v1/wake',
  summary: 'Work written behind the deployment’s back may be due at `at`',
  description:
    'For writers outside the deployment (your own transaction with enqueueStatement, another service, SQL): lowers the wake state, so the work starts at `at` (default now) instead of at the next safety check (IDLE_CHECK_MS). Optional JSON body `{ "at": "<ISO-8601>" }`.',
  tags: ['operations'],
  security: bearerSecurity,
  responses: { 202: jsonContent(WakeAccepted, 'The deployment will look by then'), ...errorResponses(400, 401) },
});

export function registerTickRoutes(app: App, { skiplock, tick, arrivedAt }: RouteDeps): void {
  for (const method of ['get', 'post'] as const) {
    // The budget counts from the request's arrival: the platform's limit (Vercel's maxDuration) does.
    // An explicit tick (a person, a deploy script, a platform cron): it does not consult the wake state.
    // It ticks what is due and answers once idle: polling on, or waiting for an instant to come,
    // would hold a request that platforms bill by duration (the instant has its own trigger).
    // A deployment that asks for polling (tick.untilIdle: false) gets it.
    app.openapi(tickRoute(method), async (c) => c.json(await skiplock.tick({ ...tick, untilIdle: tick.untilIdle ?? true, startedAt: arrivedAt(c) }), 200));
  }
  app.openapi(wakeRoute, async (c) => {
    const at = await wakeInstant(c.req.raw);
    await skiplock.wake(at);
    return c.json({ at: (at ?? new Date()).toISOString() }, 202);
  });
}

/** The optional body of POST /v1/wake: none, `{}` or `{ at }`. */
async function wakeInstant(request: Request): Promise<Date | undefined> {
  const text = await request.text();
  if (text.trim() === '') return undefined;
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    throw new SkiplockError('invalid_json', 'the body is not valid JSON');
  }
  const parsed = WakeBody.safeParse(body);
  if (!parsed.success) throw new SkiplockError('invalid_request', 'invalid request body', toIssues(parsed.error));
  return parsed.data.at === undefined ? undefined : new Date(parsed.data.at);
}
