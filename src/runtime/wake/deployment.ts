/**
 * Waking a deployment this process does not run (`createSkiplock({ deployment: { url, token } })`):
 * a web service beside a worker, a script, the CLI. After each write that creates or moves due work
 * (the same hook as the deployment's own writes, src/runtime/wake/wake.ts), an authenticated
 * `POST {url}/v1/wake` with `{ at }` (or `{}` for due now) lowers the deployment's wake state.
 *
 * One request per earlier instant:
 * - a later instant than one already sent and not yet passed sends nothing (that deployment wakes
 *   at the earlier one and then reads the database);
 * - due-now work right after a due-now request started (within COALESCE_MS) is covered by ONE
 *   trailing request, sent once such writes pause for QUIET_MS (at most MAX_DEFER_MS after the
 *   first of them) — after every write of the burst committed, so the deployment's tick finds
 *   them all: a burst of 100 enqueues costs two requests, a batch one. (The tick the first request
 *   starts claims until idle, so it usually runs the burst's jobs before the trailing one comes.)
 *
 * Never failing the write, never slowing it beyond `timeoutMs`: the write that sends a request
 * awaits it (a serverless invocation may be frozen once it answers, so a request not awaited may
 * never leave), aborted at `timeoutMs`; a failure is logged and the deployment's safety check
 * (IDLE_CHECK_MS) remains. A write coalesced into the trailing request does not wait for it (it is
 * sent from a timer); on a serverless platform, end a burst with `await skiplock.wake()` (it always
 * sends, at once) or write it with enqueueBatch.
 */
import { MIN_SECRET_LENGTH } from '../../core/types.ts';
import type { Logger } from '../observability/log.ts';
import { WAKE_EARLY_MS } from './state.ts';

export interface DeploymentOptions {
  /** The deployment's base URL, where its `/v1/wake` is: `https://app.example/skiplock`. http(s). */
  url: string;
  /** The deployment's API token (API_TOKEN), at least 16 characters. */
  token: string;
  /** The longest a write waits for the wake request, in ms; then it is aborted and logged. Default 1500. */
  timeoutMs?: number;
}

/** A due-now write this soon after a due-now request started shares one trailing request with the writes after it. */
export const COALESCE_MS = 250;
/** The trailing request goes once coalesced writes pause this long… */
export const QUIET_MS = 100;
/** …or this long after the first of them, whichever is sooner. */
export const MAX_DEFER_MS = 1_000;
export const DEFAULT_DEPLOYMENT_TIMEOUT_MS = 1_500;

/** The option checked, with the URL normalized (no trailing slash); TypeError naming what is wrong. */
export function checkDeployment(value: unknown): Required<DeploymentOptions> {
  if (typeof value !== 'object' || value === null) throw new TypeError('deployment must be an object { url, token }');
  const { url, token, timeoutMs = DEFAULT_DEPLOYMENT_TIMEOUT_MS } = value as Partial<DeploymentOptions>;
  let parsed: URL | undefined;
  try {
    parsed = typeof url === 'string' ? new URL(url) : undefined;
  } catch {
    parsed = undefined;
  }
  if (!parsed || (parsed.protocol !== 'http:' && parsed.protocol !== 'https:'))
    throw new TypeError(`deployment.url must be the deployment's http(s) base URL, where /v1/wake is (https://app.example/skiplock), got ${JSON.stringify(url)}`);
  if (parsed.search || parsed.hash) throw new TypeError(`deployment.url must be a base URL without a query or fragment, got ${JSON.stringify(url)}`);
  if (typeof token !== 'string') throw new TypeError("deployment.token must be a string: the deployment's API_TOKEN");
  if (token.length < MIN_SECRET_LENGTH)
    throw new TypeError(`deployment.token is too short (${token.length} characters, at least ${MIN_SECRET_LENGTH}): it is the deployment's API_TOKEN`);
  if (!Number.isInteger(timeoutMs) || timeoutMs < 1) throw new TypeError(`deployment.timeoutMs must be a positive integer, got ${String(timeoutMs)}`);
  return { url: `${parsed.origin}${parsed.pathname.replace(/\/+$/, '')}`, token, timeoutMs };
}

export interface DeploymentWake {
  /**
   * Work may be due at `atMs` (epoch ms): wakes the deployment unless a request already covers it.
   * `explicit` (skiplock.wake()): always sends, at once. Resolves when the request answered, failed
   * (logged) or was aborted at the timeout; never rejects.
   */
  (atMs: number, explicit?: boolean): Promise<void>;
}

export function createDeploymentWake(options: DeploymentOptions, log: Logger, fetchImpl: typeof fetch = (...args) => globalThis.fetch(...args)): DeploymentWake {
  const { url, token, timeoutMs } = checkDeployment(options);
  const endpoint = `${url}/v1/wake`;
  /** The earliest future instant a request was sent for (and did not fail): later ones are covered. */
  let armed: number | null = null;
  /** When the last due-now request started (Date.now()). */
  let lastNowAt = -Infinity;
  let trailing: ReturnType<typeof setTimeout> | null = null;
  /** When the first write waiting for the trailing request came (Date.now()). */
  let firstDeferred: number | null = null;

  async function send(atMs: number | undefined): Promise<void> {
    const at = atMs === undefined ? undefined : new Date(atMs).toISOString();
    try {
      const response = await fetchImpl(endpoint, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify(at === undefined ? {} : { at }),
        signal: AbortSignal.timeout(timeoutMs),
      });
      const text = await response.text().catch(() => '');
      if (!response.ok) throw new Error(`HTTP ${response.status}${text ? `: ${text.slice(0, 200)}` : ''}`);
    } catch (error) {
      if (atMs !== undefined && armed === atMs) armed = null;
      const reason = error instanceof Error && (error.name === 'TimeoutError' || error.name === 'AbortError') ? `no answer within ${timeoutMs} ms` : String(error);
      log('warn', 'waking the deployment failed; it finds the work at its next safety check (IDLE_CHECK_MS)', { url: endpoint, at: at ?? 'now', error: reason });
    }
  }

  function sendNow(): Promise<void> {
    lastNowAt = Date.now();
    return send(undefined);
  }

  return (atMs, explicit = false) => {
    const now = Date.now();
    if (armed !== null && armed <= now) armed = null;
    if (atMs > now + WAKE_EARLY_MS) {
      if (!explicit && armed !== null && atMs >= armed) return Promise.resolve();
      armed = armed === null ? atMs : Math.min(armed, atMs);
      return send(atMs);
    }
    if (explicit || (trailing === null && now - lastNowAt >= COALESCE_MS)) {
      // Sent after every write so far committed: it covers the writes a pending trailing request waits for.
      if (trailing) clearTimeout(trailing);
      trailing = null;
      firstDeferred = null;
      return sendNow();
    }
    // A due-now request started moments ago, maybe before this write committed: one more once the burst pauses.
    firstDeferred ??= now;
    if (trailing) clearTimeout(trailing);
    trailing = setTimeout(() => {
      trailing = null;
      firstDeferred = null;
      void sendNow();
    }, Math.max(0, Math.min(now + QUIET_MS, firstDeferred + MAX_DEFER_MS) - now));
    return Promise.resolve();
  };
}
