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
  const driver: DriverState = {
    to: typeof target === 'string' ? { kind: 'worker', origin: target } : target,
    log, retryMs, onCall, inFlight: new Set(), stopped: false, workerPath: 0, reached: false, warnedDown: false,
  };
  let timer: ReturnType<typeof setTimeout> | undefined;
  let retry: ReturnType<typeof setTimeout> | undefined;

  // Once a minute from now on; and until the app has answered once, a try every retryMs. (A
  // call resolves when its invocation ends, so the minute's calls do not wait for it.)
  const retryUntilReached = () => {
    void callApp(driver).then((answered) => {
      if (!driver.stopped && !answered && !driver.reached) retry = setTimeout(retryUntilReached, retryMs);
    });
  };
  const scheduleNext = () => {
    timer = setTimeout(() => {
      void callApp(driver);
      scheduleNext();
    }, intervalMs - (Date.now() % intervalMs));
  };

  retryUntilReached();
  scheduleNext();
  return {
    stop() {
      driver.stopped = true;
      clearTimeout(timer);
      clearTimeout(retry);
      for (const controller of driver.inFlight) controller.abort();
    },
  };
}

/** A running driver's target, options and what its calls have learnt so far. */
interface DriverState {
  to: CronTarget;
  log: (message: string) => void;
  retryMs: number;
  onCall: CronDriverOptions['onCall'];
  /** The calls not answered yet: stop() aborts them. */
  inFlight: Set<AbortController>;
  stopped: boolean;
  /** Which of WORKER_PATHS this wrangler answers (the next one after a 404). */
  workerPath: number;
  /** Whether the app has answered once. */
  reached: boolean;
  warnedDown: boolean;
}

function requestFor({ to, workerPath }: DriverState): { url: string; init: RequestInit } {
  return to.kind === 'worker'
    ? { url: `${to.origin}${WORKER_PATHS[workerPath]}`, init: {} }
    : { url: to.url, init: { headers: { authorization: `Bearer ${to.cronSecret}` } } };
}

/** One call of the app's scheduled entry: resolves true when the app answered (whatever its status), false when it was not reachable. */
async function callApp(driver: DriverState): Promise<boolean> {
  const { log } = driver;
  const controller = new AbortController();
  driver.inFlight.add(controller);
  const { url, init } = requestFor(driver);
  const started = performance.now();
  try {
    const response = await fetch(url, { ...init, signal: controller.signal });
    await response.text();
    if (driver.to.kind === 'worker' && response.status === 404 && driver.workerPath < WORKER_PATHS.length - 1) {
      driver.workerPath += 1;
      return callApp(driver);
    }
    if (!driver.reached) log(`[cron] calling ${url} every minute, as the platform's cron would`);
    driver.reached = true;
    driver.onCall?.({ url, status: response.status, ms: performance.now() - started });
    if (!response.ok) log(`[cron] ${url} answered HTTP ${response.status}`);
    return true;
  } catch (error) {
    if (controller.signal.aborted) return true;
    if (driver.reached) log(`[cron] ${url} failed: ${String(error)}`);
    else if (!driver.warnedDown) log(`[cron] waiting for ${new URL(url).origin} to answer (start your app); trying every ${driver.retryMs / 1000} s`);
    driver.warnedDown = true;
    return false;
  } finally {
    driver.inFlight.delete(controller);
  }
}
