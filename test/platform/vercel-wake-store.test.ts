/**
 * The Vercel wake state in the Runtime Cache (src/platform/vercel/wake-store.ts): the merge rules
 * of the port over a cache with no compare-and-set, what an absent, foreign or failing entry
 * reads as (unknown: the invocation checks the database), and where getCache puts it on Vercel
 * (the request context's cache).
 */
import { afterEach, expect, test } from 'vitest';
import { createRuntimeCacheWakeStore, wakeStateKey, type RuntimeCacheLike } from '../../src/platform/vercel/wake-store.ts';

function mapCache(): RuntimeCacheLike & { map: Map<string, unknown> } {
  const map = new Map<string, unknown>();
  return { map, get: async (key) => map.get(key) ?? null, set: async (key, value) => void map.set(key, structuredClone(value)) };
}

const REQUEST_CONTEXT = Symbol.for('@vercel/request-context');
afterEach(() => {
  delete (globalThis as Record<symbol, unknown>)[REQUEST_CONTEXT];
});

test('absent: unknown; lower makes an unchecked state; a tick writes its conclusion', async () => {
  const cache = mapCache();
  const store = createRuntimeCacheWakeStore({ key: 'k', cache: () => cache });
  expect(await store.read()).toBeNull();
  await store.lower(5_000);
  expect(await store.read()).toEqual({ dueAt: 5_000, checkedAt: null, version: 0 });
  await store.write({ dueAt: 60_000, checkedAt: 1_000 }, 0);
  expect(await store.read()).toEqual({ dueAt: 60_000, checkedAt: 1_000, version: 1 });
  await store.lower(90_000); // later than what is stored: dueAt stays
  expect(await store.read()).toMatchObject({ dueAt: 60_000, version: 2 });
});

test('a conclusion written over a lowered state keeps the earlier instant', async () => {
  const cache = mapCache();
  const store = createRuntimeCacheWakeStore({ key: 'k', cache: () => cache });
  await store.write({ dueAt: null, checkedAt: 0 }, -1);
  const seen = (await store.read())!.version;
  await store.lower(2_000); // an enqueue while the tick ran
  await store.write({ dueAt: null, checkedAt: 1_000 }, seen); // the tick saw nothing due
  expect(await store.read()).toMatchObject({ dueAt: 2_000, checkedAt: 1_000 });
});

test('a foreign or broken entry reads as unknown; a failing cache is reported, never thrown', async () => {
  const cache = mapCache();
  const store = createRuntimeCacheWakeStore({ key: 'k', cache: () => cache });
  for (const value of ['x', { dueAt: 'soon', checkedAt: 0, version: 0 }, { dueAt: 1, checkedAt: 0 }, { dueAt: Infinity, checkedAt: 0, version: 1 }]) {
    cache.map.set('k', value);
    expect(await store.read()).toBeNull();
  }
  const warnings: string[] = [];
  const down: RuntimeCacheLike = { get: () => Promise.reject(new Error('timeout')), set: () => Promise.reject(new Error('timeout')) };
  const failing = createRuntimeCacheWakeStore({ key: 'k', cache: () => down, warn: (message) => warnings.push(message) });
  expect(await failing.read()).toBeNull();
  await failing.lower(1);
  await failing.write({ dueAt: null, checkedAt: 0 }, -1);
  expect(warnings.some((w) => w.includes('reading'))).toBe(true);
  expect(warnings.some((w) => w.includes('writing'))).toBe(true);
});

test('by default the entry goes to the cache Vercel puts in the request context, under the skiplock namespace', async () => {
  const cache = mapCache();
  (globalThis as Record<symbol, unknown>)[REQUEST_CONTEXT] = { get: () => ({ cache }) };
  const store = createRuntimeCacheWakeStore({ key: 'wake-state:abc' });
  await store.lower(7);
  expect([...cache.map.keys()]).toHaveLength(1);
  expect([...cache.map.keys()][0]).toMatch(/^skiplock\$/);
  expect(await store.read()).toEqual({ dueAt: 7, checkedAt: null, version: 0 });
});

test('one key per database and task list; the password is not part of it', () => {
  const a = wakeStateKey('postgres://u:p1@db.example/app', ['b', 'a'], ['s']);
  expect(wakeStateKey('postgres://u:p2@db.example/app', ['a', 'b'], ['s'])).toBe(a);
  expect(wakeStateKey('postgres://u:p1@db.example/other', ['a', 'b'], ['s'])).not.toBe(a);
  expect(wakeStateKey('postgres://u:p1@db.example/app', ['a'], ['s'])).not.toBe(a);
  expect(wakeStateKey('postgres://u:p1@db.example/app', ['a', 'b'], [])).not.toBe(a);
  expect(a).not.toContain('p1');
});
