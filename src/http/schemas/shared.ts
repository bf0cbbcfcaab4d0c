/**
 * What the schemas of the HTTP API share: zod extended with `.openapi` (before any schema uses
 * it), the JSON and text pieces of requests and responses, and the error responses every route
 * documents. One file per resource beside it (jobs, schedules, events, operations), as in routes/.
 *
 * The library's own input schemas (enqueue, reschedule, schedule, send event) are taken with
 * clone() first: zod 4 gives a schema the `.openapi` method only if it was built after
 * @hono/zod-openapi extended zod, and the library's schemas may well be built before.
 */
import { extendZodWithOpenApi } from '../zod-openapi.ts';
import * as z from 'zod';
import { unstorableText } from '../../core/json.ts';

/*
 * The `.openapi` method, before the schemas below use it (importing @hono/zod-openapi extends zod
 * too, but from a module this one need not follow). Only `ZodType` is passed: the whole `z`
 * namespace as a value would keep all of zod, its 63 locales included, in a Worker's bundle.
 */
extendZodWithOpenApi({ ZodType: z.ZodType } as unknown as typeof z);

/**
 * A JSON value the server always sends (a job's payload, result, progress, a step's output, …):
 * any JSON, null included. Refusing `undefined` makes it required in the document: a bare
 * z.unknown() would be optional there, and generated clients would type it so.
 */
export const anyJson = () => z.unknown().refine((value): boolean => value !== undefined); // `: boolean`: not a type guard, its type stays unknown

/** Text that PostgreSQL can store (used for values that reach SQL as text). */
export const storableText = z.string().superRefine((text, ctx) => {
  const problem = unstorableText(text);
  if (problem) ctx.addIssue({ code: 'custom', message: problem });
});

/** The Idempotency-Key header of an enqueue and of an event's send. */
export const IdempotencyHeader = z.object({
  'idempotency-key': storableText.min(1).max(255).optional().openapi({
    description: 'Same as the body field `idempotencyKey`: a replay returns the original job with 200.',
  }),
});

/** The `limit` query parameter of a paged list. */
export const pageLimit = (limits: { default: number; max: number }) =>
  z.coerce
    .number()
    .int()
    .min(1)
    .max(limits.max)
    .optional()
    .openapi({ description: `Page size, 1 to ${limits.max}. Default ${limits.default}.` });

/** Text that may be null, and an instant (ISO 8601), as responses send them. */
export const nullableText = z.string().nullable();
export const instant = z.string().openapi({ format: 'date-time' });

export const ErrorBody = z
  .object({
    error: z.object({
      code: z.enum([
        'unauthorized',
        'invalid_json',
        'invalid_request',
        'unknown_task',
        'invalid_payload',
        'not_found',
        'conflict',
        'payload_too_large',
        'method_not_allowed',
        'too_many_requests',
        'not_configured',
        'not_migrated',
        'internal',
      ]),
      message: z.string(),
      issues: z.array(z.object({ path: z.array(z.union([z.string(), z.number()])), message: z.string() })).optional(),
    }),
  })
  .openapi('Error');

const ERROR_DESCRIPTIONS = {
  400: 'invalid_json, invalid_request, unknown_task or invalid_payload',
  401: 'unauthorized: missing or wrong bearer token',
  404: 'not_found',
  409: 'conflict: the job is not in a state that allows this',
  413: 'payload_too_large',
  429: 'too_many_requests: too many wrong tokens from this address; wait for Retry-After seconds',
  503: 'not_configured (API_TOKEN or another secret missing or too short) or not_migrated (run `npx skiplock migrate`, or pass `autoMigrate`)',
} as const;

/** The error responses of a route, for the OpenAPI document (a route that answers 401 may answer 429 too). */
export function errorResponses<S extends keyof typeof ERROR_DESCRIPTIONS>(...given: S[]) {
  const statuses: (keyof typeof ERROR_DESCRIPTIONS)[] = given.includes(401 as S) && !given.includes(429 as S) ? [...given, 429] : given;
  return Object.fromEntries(
    statuses.map((status) => [status, { description: ERROR_DESCRIPTIONS[status], content: { 'application/json': { schema: ErrorBody } } }]),
  ) as unknown as Record<S, { description: string; content: { 'application/json': { schema: typeof ErrorBody } } }>;
}

export function jsonContent<T extends z.ZodType>(schema: T, description: string) {
  return { description, content: { 'application/json': { schema } } };
}

export const bearerSecurity = [{ bearer: [] as string[] }];
