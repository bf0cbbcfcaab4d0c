/**
 * The local stand-in for Cloudflare's cron trigger: calls wrangler dev's `/__scheduled` once at
 * start and then every minute on the minute, as `* * * * *` would. It does not wait for an
 * invocation to end (each one ticks for most of a minute), so they never fall behind.
 */
export interface CronDriver {
  stop(): void;
}

export function startCronDriver(workerUrl: string, log: (message: string) => void = console.error): CronDriver {
  const url = `${workerUrl}/__scheduled?cron=${encodeURIComponent('* * * * *').replaceAll('%20', '+')}`;
  const inFlight = new Set<AbortController>();
  let timer: ReturnType<typeof setTimeout> | undefined;

  const fire = () => {
    const controller = new AbortController();
    inFlight.add(controller);
    fetch(url, { signal: controller.signal })
      .then((response) => response.text().then(() => {
        if (!response.ok) log(`[cron] /__scheduled answered HTTP ${response.status}`);
      }))
      .catch((error: unknown) => {
        if (!controller.signal.aborted) log(`[cron] /__scheduled failed: ${String(error)}`);
      })
      .finally(() => inFlight.delete(controller));
  };
  const scheduleNext = () => {
    timer = setTimeout(() => {
      fire();
      scheduleNext();
    }, 60_000 - (Date.now() % 60_000));
  };

  fire();
  scheduleNext();
  return {
    stop() {
      clearTimeout(timer);
      for (const controller of inFlight) controller.abort();
    },
  };
}
