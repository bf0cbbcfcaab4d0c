/**
 * The local stand-in for the platform's minute cron: calls an app's scheduled entry once at start
 * and then every minute on the minute, as `* * * * *` would. Two kinds of entry:
 *
 * - a Worker under `wrangler dev` (its origin): the scheduled handler, through wrangler's
 *   `/cdn-cgi/handler/scheduled` (no flag needed) or, where that answers 404, `/__scheduled`
 *   (`wrangler dev --test-scheduled`);
 * - a tick route (a Next.js or Vercel app's `/v1/tick`): `GET` with `Authorization: Bearer
 *   $CRON_SECRET`, as Vercel's cron calls it.
 *
 * It does not wait for an invocation to end (one may tick for most of a minute), so calls never
 * fall behind. While the app is not up yet (or restarting), the first call is retried every few
 * seconds, so that starting the app after `skiplock dev` needs no second step.
 */
export interface CronDriver {
  stop(): void;
}

export type CronTarget =
  /** A Worker under wrangler dev, by its origin (`http://127.0.0.1:8787`). */
  | { kind: 'worker'; origin: string }
  /** An app's tick route, called with the cron secret. */
  | { kind: 'tick-route'; url: string; cronSecret: string };

export interface CronDriverOptions {
  /** Where messages go. Default console.error. */
  log?: (message: string) => void;
  /** Between calls, aligned to multiples of it (the minute). Default 60 000. */
  intervalMs?: number;
  /** Before the first successful call, how long to wait between tries. Default 2 000. */
  retryMs?: number;
  /** Told of each call that the app answered, with its status and how long it took. */
  onCall?: (call: { url: string; status: number; ms: number }) => void;
}

const CRON = encodeURIComponent('* * * * *').replaceAll('%20', '+');
const WORKER_PATHS = [`/cdn-cgi/handler/scheduled?cron=${CRON}`, `/__scheduled?cron=${CRON}`];

/**
 * What `--cron URL` names: a bare origin (path `/`) is a Worker under wrangler dev; any other
 * path is a tick route, called with `cronSecret`.
 */
export function cronTarget(url: string, cronSecret: string): CronTarget {
  const parsed = new URL(url);
  if (parsed.pathname === '/' && parsed.search === '') return { kind: 'worker', origin: parsed.origin };
  return { kind: 'tick-route', url: parsed.href, cronSecret };
}

/** Also takes a Worker's origin as a string, as `npm start` passes it. */
export function startCronDriver(target: CronTarget | string, options: CronDriverOptions | ((message: string) => void) = {}): CronDriver {
  const { log = console.error, intervalMs = 60_000, retryMs = 2_000, onCall } = typeof options === 'function' ? { log: options } : options;
  const to: CronTarget = typeof target === 'string' ? { kind: 'worker', origin: target } : target;
  const inFlight = new Set<AbortController>();
  let timer: ReturnType<typeof setTimeout> | undefined;
  let retry: ReturnType<typeof setTimeout> | undefined;
  let stopped = false;
  /** Which of WORKER_PATHS this wrangler answers (the next one after a 404). */
  let workerPath = 0;
  let reached = false;
  let warnedDown = false;

  const request = (): { url: string; init: RequestInit } =>
    to.kind === 'worker'
      ? { url: `${to.origin}${WORKER_PATHS[workerPath]}`, init: {} }
      : { url: to.url, init: { headers: { authorization: `Bearer ${to.cronSecret}` } } };

  /** Resolves true when the app answered (whatever its status), false when it was not reachable. */
  const call = async (): Promise<boolean> => {
    const controller = new AbortController();
    inFlight.add(controller);
    const { url, init } = request();
    const started = performance.now();
    try {
      const response = await fetch(url, { ...init, signal: controller.signal });
      await response.text();
      if (to.kind === 'worker' && response.status === 404 && workerPath < WORKER_PATHS.length - 1) {
        workerPath += 1;
        return call();
      }
      if (!reached) log(`[cron] calling ${url} every minute, as the platform's cron would`);
      reached = true;
      onCall?.({ url, status: response.status, ms: performance.now() - started });
      if (!response.ok) log(`[cron] ${url} answered HTTP ${response.status}`);
      return true;
    } catch (error) {
      if (controller.signal.aborted) return true;
      if (reached) log(`[cron] ${url} failed: ${String(error)}`);
      else if (!warnedDown) log(`[cron] waiting for ${new URL(url).origin} to answer (start your app); trying every ${retryMs / 1000} s`);
      warnedDown = true;
      return false;
    } finally {
      inFlight.delete(controller);
    }
  };

  // Once a minute from now on; and until the app has answered once, a try every retryMs. (A
  // call resolves when its invocation ends, so the minute's calls do not wait for it.)
  const retryUntilReached = () => {
    void call().then((answered) => {
      if (!stopped && !answered && !reached) retry = setTimeout(retryUntilReached, retryMs);
    });
  };
  const scheduleNext = () => {
    timer = setTimeout(() => {
      void call();
      scheduleNext();
    }, intervalMs - (Date.now() % intervalMs));
  };

  retryUntilReached();
  scheduleNext();
  return {
    stop() {
      stopped = true;
      clearTimeout(timer);
      clearTimeout(retry);
      for (const controller of inFlight) controller.abort();
    },
  };
}
