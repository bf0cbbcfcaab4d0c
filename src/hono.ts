/**
 * `skiplock/hono`: the HTTP API and dashboard as a hono app, to mount in your own:
 *
 *   const app = new Hono();
 *   app.route('/jobs-api', createSkiplockApp({ skiplock, apiToken: env.API_TOKEN }));
 *
 * Under a prefix, everything answers there (/jobs-api/v1/jobs, /jobs-api/ for the dashboard),
 * and the dashboard's links follow it. `createApp` is the same app unwrapped (an OpenAPIHono
 * serving the unprefixed paths), e.g. to add routes to its OpenAPI document.
 */
import type { Hono } from 'hono';
import { createApp, type AppOptions } from './http/app.ts';
import { asSubApp } from './http/mount.ts';

export { createApp, longestJobTimeoutMs, type AppOptions } from './http/app.ts';
export type { App } from './http/app-types.ts';

/** The app as a hono sub-app: `parent.route(prefix, createSkiplockApp(options))`, or served on its own. */
export function createSkiplockApp(options: AppOptions): Hono {
  return asSubApp(createApp(options));
}
