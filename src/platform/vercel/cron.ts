/**
 * The Vercel cron's request: `GET <basePath>/v1/tick` with `Authorization: Bearer $CRON_SECRET`.
 * It consults the wake state (the Runtime Cache, wake-store.ts) instead of polling for its whole
 * budget:
 *
 * - nothing due (and no safety check due): no statement; it answers at once;
 * - something due now, or soon: it ticks then (waiting for that instant rather than polling),
 *   until idle, and writes the state the database reports. "Soon" is WAIT_WITHIN_MS with the
 *   Queues timer (a later instant is the timer's: it answers at once), and its minute without one
 *   (nothing else would start it before the next cron);
 * - its tick finds more due work than it can run (a claim fills every slot): it calls its own tick
 *   route `maxParallelTicks − 1` more times (one invocation each, marked so that they do not fan
 *   out again, given its deadline so that they end with it) and waits for them. A backlog left
 *   at the deadline is the next minute's (its wake state says due now).
 *
 * Any other request to the route (API_TOKEN: a person, a script) is the app's explicit tick.
 */
import { bearerToken, safeEqual, type TokenGuard } from '../../http/auth.ts';
import { normalizeBasePath } from '../../http/mount.ts';
import type { TickResult } from '../../core/types.ts';
import type { Skiplock } from '../../runtime/skiplock.ts';
import type { TickOptions } from '../../runtime/tick/index.ts';
import type { WakeStore } from '../../runtime/wake/index.ts';

/** Marks a tick started by another one's backlog; its value is the starter's deadline (epoch ms). */
export const FAN_OUT_HEADER = 'x-skiplock-fan-out';
/**
 * The longest a cron invocation waits for a coming instant. Vercel bills a function by its
 * duration (provisioned memory for as long as it runs: a wait costs as much as work), and another
 * invocation costs about what a second of a 2 GB function's waiting does (docs/platforms.md, "When
 * the cron waits"); so a wait pays only for an instant under a second away — also the finest
 * delay a Queues message takes (`delaySeconds`). Anything later is the next trigger's.
 */
export const WAIT_WITHIN_MS = 1_000;
/**
 * Without a timer (no `queue` option) nothing but the next cron starts work due later: then the
 * invocation waits inside its minute for each instant (a wait is cheaper than a job a minute
 * late, or a day on Hobby), as long as the longest job still fits after it.
 */
export const WAIT_WITHOUT_TIMER_MS = 59_000;

export interface VercelCronOptions {
  skiplock: Skiplock;
  tick: TickOptions;
  store: WakeStore;
  cronSecret: string | undefined;
  basePath?: string;
  /** Invocations a backlog may run at once, this one included (1: no fan-out). */
  maxParallelTicks: number;
  /** Whether a timer (Vercel Queues) starts work due later: then the cron waits only WAIT_WITHIN_MS, else within its minute. */
  timer?: boolean;
  /** Calls the tick route (a test passes the handler itself). Default: fetch. */
  fetch?: (request: Request) => Promise<Response>;
  /** The app's counts of wrong tokens: a held source is left to the app (429), so this route tells it nothing. */
  tokenGuard?: TokenGuard;
}

/** Answers the cron's request, or resolves undefined for any other request (the app serves it). */
export function createVercelCron(options: VercelCronOptions): (request: Request, arrivedAt: number) => Promise<Response | undefined> {
  const tickPath = `${normalizeBasePath(options.basePath)}/v1/tick`;
  const call = options.fetch ?? ((request: Request) => fetch(request));
  const { skiplock, tick, store, cronSecret, maxParallelTicks } = options;
  const budgetMs = tick.budgetMs ?? 30_000;
  const marginMs = tick.marginMs ?? 1_000;
  const longestTaskTimeoutMs = Math.max(0, ...[...skiplock.tasks.values()].map((task) => task.timeoutMs));

  return async (request, arrivedAt) => {
    if (request.method !== 'GET' || !cronSecret || new URL(request.url).pathname !== tickPath) return undefined;
    if (options.tokenGuard?.held(request)) return undefined;
    const token = bearerToken(request.headers.get('authorization') ?? undefined);
    if (token === undefined || !(await safeEqual(token, cronSecret))) return undefined; // the app answers (API_TOKEN, or 401)

    const parent = Number(request.headers.get(FAN_OUT_HEADER));
    const child = Number.isFinite(parent) && parent > 0;
    // A child ends with the tick that started it, so that a backlog never runs more than maxParallelTicks at once.
    const ownBudget = child ? Math.min(budgetMs, parent - Date.now()) : budgetMs;
    if (ownBudget <= marginMs) return Response.json({ ticked: false, reason: 'too-late' });
    const deadline = Math.floor(Date.now() + ownBudget - (performance.now() - arrivedAt));
    // With a timer, waiting for an instant pays only when it is near (WAIT_WITHIN_MS); without
    // one, nothing else would start it before the next cron. Only while the longest job still fits.
    const longestWaitMs = options.timer ? WAIT_WITHIN_MS : WAIT_WITHOUT_TIMER_MS;
    const waitWithinMs = child ? 0 : Math.max(0, Math.min(longestWaitMs, ownBudget - marginMs - longestTaskTimeoutMs));
    // The first claim that fills every slot starts the others; they run beside this tick.
    const more: Promise<unknown>[] = [];
    const onBacklog = child || maxParallelTicks <= 1 ? undefined : () => {
      if (more.length > 0 || deadline - Date.now() <= marginMs) return;
      for (let i = 1; i < maxParallelTicks; i += 1) {
        more.push(call(new Request(request.url, { headers: { authorization: `Bearer ${cronSecret}`, [FAN_OUT_HEADER]: String(deadline) } })).then(
          (response) => response.body?.cancel(),
          (error: unknown) => console.error('[skiplock] starting a tick for the backlog failed', error),
        ));
      }
    };
    let result = await skiplock.tickIfDue({ ...tick, budgetMs: ownBudget, startedAt: arrivedAt, untilIdle: true, store, force: child, waitWithinMs, onBacklog });
    // Due work left (a wake-up a little early, or work that became due as the tick ended): while
    // there is time, tick again rather than leave it to the next minute.
    for (let total = result.result; result.backlog && deadline - Date.now() > marginMs + longestTaskTimeoutMs; ) {
      result = await skiplock.tickIfDue({ ...tick, budgetMs: ownBudget, startedAt: arrivedAt, untilIdle: true, store, force: true, waitWithinMs: child ? 0 : Math.max(0, waitWithinMs - (performance.now() - arrivedAt)), onBacklog });
      total = addResults(total, result.result);
      result = { ...result, ticked: true, result: total };
    }
    await Promise.all(more); // Vercel keeps the invocation open for them
    const fannedOut = more.length;
    return Response.json({ ...result.result, ticked: result.ticked, reason: result.reason, backlog: result.backlog, fannedOut, nextAt: result.nextAtMs === null ? null : new Date(result.nextAtMs).toISOString() });
  };
}

function addResults(a: TickResult, b: TickResult): TickResult {
  const sum = { ...a };
  for (const key of Object.keys(sum) as (keyof TickResult)[]) sum[key] += b[key];
  return sum;
}
