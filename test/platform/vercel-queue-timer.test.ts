/**
 * The Vercel Queues timer's sends when the Queue Service is out of reach (`next dev` without
 * Vercel's credentials): the failure is said once until a send succeeds, not at every instant.
 */
import { expect, test } from 'vitest';
import { createQueueTimer, type VercelQueueSdk } from '../../src/platform/vercel/queue-timer.ts';

test('a failing send is logged once until one succeeds, then again at the next failure', async () => {
  let reachable = false;
  const sdk = {
    QueueClient: class {
      handleCallback() {
        return async () => new Response(null);
      }
    },
    PollingQueueClient: class {
      async send() {
        if (!reachable) throw new Error('no OIDC token');
        return { messageId: 'm' };
      }
    },
  } as unknown as VercelQueueSdk;
  const warnings: string[] = [];
  const now = Date.parse('2026-12-04T12:00:00Z');
  const timer = createQueueTimer({ options: { sdk }, env: { API_TOKEN: 'x'.repeat(32) }, stateKey: 'wake-state:test', consume: async () => {}, now: () => now, warn: (message) => warnings.push(message) });
  for (let i = 1; i <= 3; i += 1) await timer.arm(now + i * 10_000);
  expect(warnings).toHaveLength(1);
  expect(warnings[0]).toMatch(/said once until a send succeeds/);
  reachable = true;
  await timer.arm(now + 40_000);
  reachable = false;
  await timer.arm(now + 50_000);
  expect(warnings).toHaveLength(2);
});
