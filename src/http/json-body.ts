/**
 * Reads a JSON body before the route's zod validator sees it, so that each way a body can be
 * wrong gets its own error: not JSON at all (invalid_json), not declared as JSON or nested
 * absurdly deep (invalid_request). The parsed body is cached by hono for the validator.
 */
import type { MiddlewareHandler } from 'hono';
import { SkiplockError } from '../core/errors.ts';
import { nestsDeeperThan } from '../core/json.ts';

/** Deeper bodies are refused before validation (payloads themselves are limited further). */
const MAX_BODY_DEPTH = 100;

/** application/json, optionally with parameters (charset); the media type the routes declare. */
const JSON_MEDIA_TYPE = /^application\/json(;\s*[a-zA-Z0-9-]+=([^;]+))*$/i;

export const jsonBody: MiddlewareHandler = async (c, next) => {
  const type = c.req.header('content-type');
  if (!type || !JSON_MEDIA_TYPE.test(type.trim()))
    throw new SkiplockError('invalid_request', 'the body must be JSON, sent with Content-Type: application/json');
  let body: unknown;
  try {
    body = await c.req.json();
  } catch {
    throw new SkiplockError('invalid_json', 'the body is not valid JSON');
  }
  if (nestsDeeperThan(body, MAX_BODY_DEPTH)) throw new SkiplockError('invalid_request', `the body nests deeper than ${MAX_BODY_DEPTH} levels`);
  await next();
};
