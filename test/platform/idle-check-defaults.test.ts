/**
 * The safety check's default per platform (issue 31, item 7): a day where the wake state is durable
 * and hears every write (the Cloudflare Durable Object), an hour where a hint can be lost (a
 * Worker's isolate memory in cron mode) — IDLE_CHECK_MS and the option override both.
 */
import { expect, test } from 'vitest';
import { createDeployments, type Env } from '../../src/platform/cloudflare/deployment.ts';
import { DEFAULT_IDLE_CHECK_MS, DURABLE_IDLE_CHECK_MS } from '../../src/runtime/wake/state.ts';
import type { DurableObjectNamespace } from '../../src/platform/cloudflare/runtime-types.ts';

const HOUR = 3_600_000;
const base = { DATABASE_URL: 'postgresql://user:password@db.invalid/neondb', API_TOKEN: 'x'.repeat(32) };
const ticker = {} as DurableObjectNamespace;
const idleCheckOf = (env: Partial<Env>, idleCheckMs?: number) => createDeployments({ tasks: [], ...(idleCheckMs === undefined ? {} : { idleCheckMs }) })({ ...base, ...env } as Env).idleCheckMs;

test('with the Durable Object (alarm mode) the safety check is daily; in cron mode hourly', () => {
  expect(DURABLE_IDLE_CHECK_MS).toBe(24 * HOUR);
  expect(DEFAULT_IDLE_CHECK_MS).toBe(HOUR);
  expect(idleCheckOf({ SKIPLOCK_TICKER: ticker })).toBe(24 * HOUR);
  expect(idleCheckOf({ SKIPLOCK_TICKER: ticker, TICKER: 'cron' })).toBe(HOUR);
  expect(idleCheckOf({ TICKER: 'cron' })).toBe(HOUR);
});

test('IDLE_CHECK_MS and the idleCheckMs option override the default', () => {
  expect(idleCheckOf({ SKIPLOCK_TICKER: ticker, IDLE_CHECK_MS: '0' })).toBe(0);
  expect(idleCheckOf({ SKIPLOCK_TICKER: ticker }, 6 * HOUR)).toBe(6 * HOUR);
  expect(idleCheckOf({ SKIPLOCK_TICKER: ticker, IDLE_CHECK_MS: String(HOUR) }, 6 * HOUR)).toBe(HOUR);
});
