/**
 * The SkiplockTicker's alarm when it fails (src/platform/cloudflare/ticker.ts), without workerd: a
 * database that is not migrated is said once per instance by skiplock itself (not_migrated), so the
 * alarm neither logs it again at each try nor keeps the database awake by trying every few seconds;
 * any other failure is logged and tried again soon.
 */
import { afterEach, expect, test, vi } from 'vitest';
import { SkiplockError } from '../../src/core/errors.ts';
import type { Deployment, Env } from '../../src/platform/cloudflare/deployment.ts';
import type { DurableObjectState } from '../../src/platform/cloudflare/runtime-types.ts';
import { createTickerClass, TICKER_RETRY_BACKOFF } from '../../src/platform/cloudflare/ticker.ts';
import { retryDelayRange } from '../../src/runtime/tick/retry-backoff.ts';

afterEach(() => vi.restoreAllMocks());

function alarmFailingWith(error: Error, outcomes?: (() => Promise<unknown>)[]) {
  const alarms: number[] = [];
  const state = { storage: { setAlarm: async (at: number) => void alarms.push(at), getAlarm: async () => null, get: async () => undefined, put: async () => {} } } as unknown as DurableObjectState;
  const deployment = {
    idleCheckMs: 3_600_000,
    maxParallelTicks: 1,
    alarmTick: { budgetMs: 25_000 },
    skiplock: { tickIfDue: async () => (outcomes?.shift() ?? (() => Promise.reject(error)))() },
  } as unknown as Deployment;
  const Ticker = createTickerClass(() => deployment);
  return { ticker: new Ticker(state, {} as Env), alarms };
}

test('an unmigrated database: no log at each alarm, and the next try a minute later, not in 5 s', async () => {
  const logged = vi.spyOn(console, 'error').mockImplementation(() => {});
  const { ticker, alarms } = alarmFailingWith(new SkiplockError('not_migrated', 'the database has no skiplock schema: run `npx skiplock migrate`'));
  const before = Date.now();
  await ticker.alarm();
  await ticker.alarm();
  expect(logged).not.toHaveBeenCalled();
  expect(alarms).toHaveLength(2);
  for (const at of alarms) expect(at).toBeGreaterThanOrEqual(before + 60_000);
});

test('any other failure (the database did not answer): logged, and tried again within a second or so', async () => {
  const logged = vi.spyOn(console, 'error').mockImplementation(() => {});
  const { ticker, alarms } = alarmFailingWith(new Error('fetch failed'));
  const before = Date.now();
  await ticker.alarm();
  expect(logged).toHaveBeenCalledOnce();
  expect(alarms).toHaveLength(1);
  expect(alarms[0]!).toBeGreaterThanOrEqual(before + TICKER_RETRY_BACKOFF.firstMs / 2);
  expect(alarms[0]!).toBeLessThanOrEqual(Date.now() + TICKER_RETRY_BACKOFF.firstMs);
});

// Issue 31, item 4: a failing alarm (its tick throws, or its conclusion fails) backs off exponentially
// to a cap (src/runtime/tick/retry-backoff.ts, as the Node runner does), not a fixed 5 s; a success resets it.
test('failures in a row back off exponentially to a cap; a concluded alarm starts the count again', async () => {
  vi.spyOn(console, 'error').mockImplementation(() => {});
  vi.spyOn(console, 'warn').mockImplementation(() => {});
  const unconcluded = () => Promise.resolve({ ticked: true, concluded: false, backlog: false, result: {}, nextAtMs: null, reason: 'due' });
  const concluded = () => Promise.resolve({ ticked: true, concluded: true, backlog: false, result: { claimed: 1 }, nextAtMs: null, reason: 'due' });
  const refused = Object.assign(new Error('canceling statement due to statement timeout'), { code: '57014' });
  const fail = () => Promise.reject(refused);
  const { ticker, alarms } = alarmFailingWith(refused, [fail, unconcluded, fail, fail, fail, fail, fail, fail, fail, concluded, fail]);
  const waits: number[] = [];
  for (let i = 0; i < 11; i += 1) {
    const before = Date.now();
    const count = alarms.length;
    await ticker.alarm();
    waits.push(alarms.length > count ? alarms.at(-1)! - before : -1);
  }
  const failures = [...waits.slice(0, 9), waits[10]!];
  // Each failure's wait lies in its range (1 s doubling, jittered between half and all of it, capped).
  failures.forEach((wait, i) => {
    const n = i < 9 ? i + 1 : 1; // after the success, the count starts again
    const { min, max } = retryDelayRange(n, refused, TICKER_RETRY_BACKOFF);
    expect(wait, `failure ${n}: ${waits.join(', ')}`).toBeGreaterThanOrEqual(min - 5);
    expect(wait, `failure ${n}: ${waits.join(', ')}`).toBeLessThanOrEqual(max + 50);
  });
  expect(waits[8]!).toBeGreaterThanOrEqual(TICKER_RETRY_BACKOFF.maxMs / 2 - 5);
  expect(Math.max(...waits)).toBeLessThanOrEqual(TICKER_RETRY_BACKOFF.maxMs + 50);
});
