/** HTTP ticks count their budget from the request's arrival, not from when the tick started. */
import { afterAll, beforeAll, expect, test } from 'vitest';
import type { TickOptions } from '../../src/runtime/tick/tick.ts';
import { createApp } from '../../src/http/app.ts';
import { API_TOKEN, createTestApp, type TestApp } from './helpers.ts';

let t: TestApp;
beforeAll(async () => {
  t = await createTestApp();
});
afterAll(() => t.close());

function appRecordingTicks() {
  const ticks: TickOptions[] = [];
  const skiplock = { ...t.skiplock, tick: async (options?: TickOptions) => (ticks.push(options ?? {}), t.skiplock.tick({ ...options, untilIdle: true })) };
  const background: Promise<unknown>[] = [];
  const app = createApp({ skiplock, apiToken: API_TOKEN, tick: { budgetMs: 25_000 }, runInBackground: (work) => background.push(work) });
  const call = (method: string, path: string, body?: unknown) =>
    app.request(new Request(`http://skiplock.test${path}`, {
      method,
      headers: { authorization: `Bearer ${API_TOKEN}`, 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    }));
  return { ticks, background, call };
}

test('GET /v1/tick: the budget starts at the request, startedAt before the tick itself began', async () => {
  const { ticks, call } = appRecordingTicks();
  const arrived = performance.now();
  expect((await call('GET', '/v1/tick')).status).toBe(200);
  expect(ticks).toHaveLength(1);
  expect(ticks[0]!.budgetMs).toBe(25_000);
  expect(ticks[0]!.startedAt).toBeGreaterThanOrEqual(arrived);
  expect(ticks[0]!.startedAt).toBeLessThanOrEqual(performance.now());
});

test('the tick after an enqueue counts from the request too: a slow enqueue leaves it less budget', async () => {
  const { ticks, background, call } = appRecordingTicks();
  const arrived = performance.now();
  const response = await call('POST', '/v1/jobs', { task: 'echo', payload: { message: 'hi' } });
  expect(response.status).toBe(201);
  await Promise.all(background);
  expect(ticks).toHaveLength(1);
  expect(ticks[0]!.startedAt).toBeGreaterThanOrEqual(arrived);
  // The tick began after the enqueue's statement: its budget started before it.
  expect(ticks[0]!.startedAt).toBeLessThanOrEqual(performance.now());
});
