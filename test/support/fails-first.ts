/** A task that fails its first attempt per key `k` and then succeeds, its retry `backoffMs` later (no jitter). */
import { z } from 'zod';
import { defineTask } from '../../src/runtime/tasks/task.ts';

export function failsFirstTask(backoffMs: number, name = 'fails-first') {
  const failedOnce = new Set<string>();
  return defineTask({
    name,
    payload: z.object({ k: z.string() }),
    timeoutMs: 1_000,
    maxAttempts: 3,
    backoff: { baseMs: backoffMs, jitter: 0, maxMs: backoffMs },
    handler: ({ k }) => {
      if (failedOnce.has(k)) return { ok: true };
      failedOnce.add(k);
      throw new Error('the first attempt fails');
    },
  });
}
