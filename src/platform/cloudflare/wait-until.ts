/**
 * `waitUntil` without a ctx: `cloudflare:workers` exports it (workerd 2025 and later), so an
 * enqueue from the user's own route can keep its tick alive after the response. Loaded lazily
 * (the specifier is not a module outside workerd: Node tests import this adapter too); until it is
 * loaded, and where it does not exist, the promise simply runs on (the minute cron or the Durable
 * Object's alarm is the safety net).
 */
type WaitUntil = (promise: Promise<unknown>) => void;

let waitUntil: WaitUntil | null | undefined;
/**
 * Where cloudflare:workers has no waitUntil (Node tests of this adapter, an old runtime): the
 * ctx of the latest invocation of createWorker's fetch/scheduled. Not per request, hence only a
 * fallback; in workerd the module's waitUntil is used.
 */
let latest: { waitUntil(promise: Promise<unknown>): void } | undefined;

/** createWorker's handlers pass their ctx (see `latest`). */
export function rememberContext(ctx: { waitUntil(promise: Promise<unknown>): void } | undefined): void {
  if (ctx) latest = ctx;
}
let loading: Promise<void> | undefined;

// A variable, so that bundlers and Vite leave the import to the runtime.
const CLOUDFLARE_WORKERS = 'cloudflare:workers';

/** Starts loading waitUntil (createWorker calls it at once, so it is there by the first enqueue). */
export function loadWaitUntil(): Promise<void> {
  loading ??= import(/* @vite-ignore */ CLOUDFLARE_WORKERS).then(
    (module: { waitUntil?: WaitUntil }) => {
      waitUntil = typeof module.waitUntil === 'function' ? module.waitUntil : null;
    },
    () => {
      waitUntil = null;
    },
  );
  return loading;
}

/** Keeps `work` alive after the response; resolves with it. */
export function inBackground(work: Promise<unknown>): Promise<unknown> {
  const keep = () => (waitUntil ? waitUntil(work) : latest?.waitUntil(work));
  if (waitUntil === undefined) void loadWaitUntil().then(keep);
  else keep();
  return work;
}
