/**
 * Cloudflare fan-out (src/platform/cloudflare/fan-out.ts), without workerd: the alarm's onBacklog
 * starts maxParallelTicks − 1 requests through SKIPLOCK_SELF, once; the Worker answers such a
 * request 202 and ticks (forced, until idle) within the alarm's deadline, and leaves any other
 * request, or one without the API token, to the app. The drain it buys is measured in workerd
 * (test/platform/measure-fan-out.ts, docs/platforms.md).
 */
import { expect, test } from 'vitest';
import { FAN_OUT_HEADER, fanOutOnBacklog, serveFanOut } from '../../src/platform/cloudflare/fan-out.ts';
import type { Deployment, Env } from '../../src/platform/cloudflare/deployment.ts';
import { createTokenGuard } from '../../src/http/auth.ts';
import { platformSource } from '../../src/http/token-throttle.ts';

function fakeDeployment(maxParallelTicks: number) {
  const ticks: Record<string, unknown>[] = [];
  const deployment = {
    maxParallelTicks,
    basePath: '/skiplock',
    alarmTick: { budgetMs: 25_000, marginMs: 1_000, concurrency: 5 },
    skiplock: { tickIfDue: async (options: Record<string, unknown>) => void ticks.push(options) },
    tokenGuard: createTokenGuard(platformSource('cloudflare')),
  } as unknown as Deployment;
  return { deployment, ticks };
}

test('onBacklog starts maxParallelTicks − 1 invocations through SKIPLOCK_SELF, once per alarm', async () => {
  const sent: Request[] = [];
  const env = { API_TOKEN: 'tok', SKIPLOCK_SELF: { fetch: async (r: Request) => (sent.push(r), new Response(null, { status: 202 })) } } as unknown as Env;
  const { deployment } = fakeDeployment(4);
  const deadline = Date.now() + 20_000;
  const onBacklog = fanOutOnBacklog(env, deployment, deadline)!;
  onBacklog();
  onBacklog();
  await new Promise((r) => setTimeout(r, 10));
  expect(sent).toHaveLength(3);
  expect(new URL(sent[0]!.url).pathname).toBe('/skiplock/v1/tick');
  expect(sent[0]!.headers.get('authorization')).toBe('Bearer tok');
  expect(sent[0]!.headers.get(FAN_OUT_HEADER)).toBe(String(deadline));
  expect(fanOutOnBacklog({ API_TOKEN: 'tok' } as Env, deployment, deadline)).toBeUndefined(); // no binding
  expect(fanOutOnBacklog(env, fakeDeployment(1).deployment, deadline)).toBeUndefined();
});

test('a fan-out request: 202 and a forced tick ending by the deadline; without the token, the app answers', async () => {
  const env = { API_TOKEN: 'tok' } as Env;
  const { deployment, ticks } = fakeDeployment(4);
  const request = (token: string, deadline: number, path = '/skiplock/v1/tick') =>
    new Request(`https://skiplock${path}`, { method: 'POST', headers: { authorization: `Bearer ${token}`, [FAN_OUT_HEADER]: String(deadline) } });
  expect(await serveFanOut(request('wrong', Date.now() + 10_000), env, deployment)).toBeUndefined();
  expect(await serveFanOut(request('tok', Date.now() + 10_000, '/v1/tick'), env, deployment)).toBeUndefined();
  const answered = await serveFanOut(request('tok', Date.now() + 10_000), env, deployment);
  expect(answered?.status).toBe(202);
  expect(ticks).toHaveLength(1);
  expect(ticks[0]).toMatchObject({ force: true, untilIdle: true });
  expect(ticks[0]!.budgetMs as number).toBeLessThanOrEqual(10_000);
  expect((await serveFanOut(request('tok', Date.now() + 500), env, deployment))?.status).toBe(204); // too late to tick
  expect(ticks).toHaveLength(1);
});

test('a source held for wrong tokens is left to the app (429) even with the right token: the fan-out route tells it nothing', async () => {
  const env = { API_TOKEN: 'tok-0123456789abcdef' } as Env;
  const { deployment, ticks } = fakeDeployment(4);
  const from = (ip: string) => new Request('https://skiplock/skiplock/v1/tick', { method: 'POST', headers: { 'cf-connecting-ip': ip } });
  for (let i = 0; i < 6; i++) await deployment.tokenGuard.check(from('203.0.113.9'), env, 'wrong', [env.API_TOKEN]);
  const request = (ip: string) =>
    new Request('https://skiplock/skiplock/v1/tick', { method: 'POST', headers: { 'cf-connecting-ip': ip, authorization: `Bearer ${env.API_TOKEN}`, [FAN_OUT_HEADER]: String(Date.now() + 10_000) } });
  expect(await serveFanOut(request('203.0.113.9'), env, deployment)).toBeUndefined();
  expect(ticks).toHaveLength(0);
  expect((await serveFanOut(request('198.51.100.7'), env, deployment))?.status).toBe(202);
});
