/**
 * The local Neon proxy (src/dev/neon-proxy.ts, run by `npx skiplock dev` and `npm start`) refuses a
 * request whose path lacks its token: an app whose NEON_FETCH_ENDPOINT was pasted from an earlier
 * run (`--new-token`) or from another project's. Its 403 says how to fix it — the Neon driver puts
 * the body in its error ("Server error (HTTP status 403): …"), which a user's own route shows —
 * and skiplock's HTTP driver turns that error into a SkiplockError `not_configured` (503 on its
 * routes and dashboard) with the same advice. No secret is in either.
 */
import { SkiplockError } from '../../core/errors.ts';

/** A proxy token: URL-safe (it is a path segment), long enough to be a secret. */
export const PROXY_TOKEN = /^[A-Za-z0-9_-]{16,}$/;

/** The start of the proxy's 403 message, by which the driver knows it. */
export const WRONG_PROXY_TOKEN = 'Missing or wrong proxy token in the path';

/** What to do, in words that survive the JSON body the driver quotes (no double quotes, no backslashes). */
const FIX =
  'this NEON_FETCH_ENDPOINT (or NEON_WS_PROXY) is not the running `npx skiplock dev`’s (an earlier run’s with --new-token, or another project’s): ' +
  'copy the variables it printed (also in .skiplock/dev.env) into .dev.vars (Cloudflare) or .env.local (Next.js) again, then restart wrangler dev or next dev';

/** The proxy's 403 body message. */
export const WRONG_PROXY_TOKEN_MESSAGE = `${WRONG_PROXY_TOKEN}: ${FIX}`;

/** The Neon driver's error for the proxy's 403, as a SkiplockError naming the fix; any other error as it is. */
export function explainProxyTokenError(error: unknown): unknown {
  const message = error instanceof Error ? error.message : '';
  if (!message.includes('HTTP status 403') || !message.includes(WRONG_PROXY_TOKEN)) return error;
  const explained = new SkiplockError('not_configured', `The local database refused this app: ${FIX}.`);
  explained.cause = error;
  return explained;
}
