/** The tick's own timing: a monotonic budget clock and a sleep that a finishing handler cuts short. */

export const yieldToIo: () => Promise<void> =
  typeof setImmediate === 'function' ? () => new Promise((resolve) => setImmediate(resolve)) : () => new Promise((resolve) => setTimeout(resolve, 0));

/** Milliseconds since the budget started, from a monotonic clock (never compared with the database's). */
export function startClock(startedAt: number | undefined): () => number {
  const current = performance.now();
  const t0 = startedAt !== undefined && Number.isFinite(startedAt) && startedAt <= current ? startedAt : current;
  return () => performance.now() - t0;
}

/** A sleep that a finishing handler can cut short. `sleep` resolves true when woken early. */
export function createWakeup() {
  let wake: () => void = () => {};
  return {
    wake: () => wake(),
    sleep(ms: number): Promise<boolean> {
      return new Promise((resolve) => {
        const timer = setTimeout(() => resolve(false), ms);
        wake = () => {
          clearTimeout(timer);
          wake = () => {};
          resolve(true);
        };
      });
    },
  };
}
