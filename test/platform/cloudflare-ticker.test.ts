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
import { createTickerClass } from '../../src/platform/cloudflare/ticker.ts';

afterEach(() => vi.restoreAllMocks());

function alarmFailingWith(error: Error) {
  const alarms: number[] = [];
  const state = { storage: { setAlarm: async (at: number) => void alarms.push(at), getAlarm: async () => null, get: async () => undefined, put: async () => {} } } as unknown as DurableObjectState;
  const deployment = {
    idleCheckMs: 3_600_000,
    maxParallelTicks: 1,
    alarmTick: { budgetMs: 25_000 },
    skiplock: { tickIfDue: async () => Promise.reject(error) },
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

test('any other failure (the database did not answer): logged, and tried again in 5 s', async () => {
  const logged = vi.spyOn(console, 'error').mockImplementation(() => {});
  const { ticker, alarms } = alarmFailingWith(new Error('fetch failed'));
  const before = Date.now();
  await ticker.alarm();
  expect(logged).toHaveBeenCalledOnce();
  expect(alarms).toHaveLength(1);
  expect(alarms[0]!).toBeGreaterThanOrEqual(before + 5_000);
  expect(alarms[0]!).toBeLessThan(before + 60_000);
});
