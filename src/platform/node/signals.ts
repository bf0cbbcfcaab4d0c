/**
 * Graceful shutdown on SIGINT/SIGTERM: the first signal runs `shutdown` and exits when it is
 * done; another one a second or more later exits at once (jobs still RUNNING then come back
 * through the reaper). Signals within that second count as one: a terminal's Ctrl-C reaches
 * the whole process group, and `npm run` forwards the same signal once more.
 */
const REPEAT_WINDOW_MS = 1_000;

/** Returns a function that starts the same shutdown without a signal. */
export function onShutdownSignal(shutdown: (signal: NodeJS.Signals) => Promise<void>): (reason: NodeJS.Signals) => void {
  let firstAt: number | undefined;
  const handle = (signal: NodeJS.Signals) => {
    if (firstAt !== undefined) {
      if (Date.now() - firstAt < REPEAT_WINDOW_MS) return;
      console.error(`[skiplock] ${signal} again: exiting now`);
      process.exit(130);
    }
    firstAt = Date.now();
    shutdown(signal).then(
      () => process.exit(0),
      (error: unknown) => {
        console.error('[skiplock] shutdown failed', error);
        process.exit(1);
      },
    );
  };
  process.on('SIGINT', handle);
  process.on('SIGTERM', handle);
  return handle;
}
