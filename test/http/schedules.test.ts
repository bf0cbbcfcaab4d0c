/** GET /v1/schedules, PUT and DELETE /v1/schedules/:name, and a put schedule firing through the tick route. */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { defineSchedule } from '../../src/runtime/schedules/definition.ts';
import { statement } from '../../src/store/sql.ts';
import { createTestApp, type TestApp } from './helpers.ts';

// The app's clock: the tick route fires what is due at this instant (no waiting).
let now = new Date('2030-01-01T00:00:00Z');
let t: TestApp;
beforeAll(
  async () =>
    (t = await createTestApp({
      skiplock: {
        now: () => now,
        schedules: [defineSchedule({ name: 'static-report', cron: '0 6 * * *', task: 'echo', payload: { message: 'static' } })],
      },
    })),
);
afterAll(() => t.close());

async function countSchedules(): Promise<number> {
  const [row] = await t.db.sql.query(statement('SELECT count(*)::int AS n FROM skiplock.schedule'));
  return Number(row!.n);
}

describe('PUT /v1/schedules/:name', () => {
  test('creates (201) then replaces (200) a dynamic schedule', async () => {
    const created = await t.call('PUT', '/v1/schedules/nightly', { body: { cron: '0 3 * * *', tz: 'Europe/Oslo', task: 'echo', payload: { message: 'n' } } });
    expect(created.status).toBe(201);
    expect(((await created.json()) as any).schedule).toMatchObject({
      name: 'nightly',
      source: 'dynamic',
      cron: '0 3 * * *',
      tz: 'Europe/Oslo',
      task: 'echo',
      payload: { message: 'n' },
      enabled: true,
      catchUp: 'latest',
      lastFiredAt: null,
    });
    const replaced = await t.call('PUT', '/v1/schedules/nightly', { body: { every: '15m', task: 'poison', catchUp: 'none' } });
    expect(replaced.status).toBe(200);
    expect(((await replaced.json()) as any).schedule).toMatchObject({ name: 'nightly', cron: null, every: 900_000, task: 'poison', catchUp: 'none' });
  });

  test.each([
    ['no timing', { task: 'echo', payload: { message: 'x' } }, 'invalid_request'],
    ['two timings', { cron: '* * * * *', every: '1m', task: 'echo', payload: { message: 'x' } }, 'invalid_request'],
    ['a bad cron', { cron: '61 * * * *', task: 'echo', payload: { message: 'x' } }, 'invalid_request'],
    ['four cron fields', { cron: '* * * *', task: 'echo', payload: { message: 'x' } }, 'invalid_request'],
    ['a cron with NUL', { cron: '* * * * *\u0000', task: 'echo', payload: { message: 'x' } }, 'invalid_request'],
    ['an unknown time zone', { cron: '* * * * *', tz: 'Mars/Olympus', task: 'echo', payload: { message: 'x' } }, 'invalid_request'],
    ['a time zone with NUL', { cron: '* * * * *', tz: 'UTC\u0000', task: 'echo', payload: { message: 'x' } }, 'invalid_request'],
    ['an interval under a second', { every: '10ms', task: 'echo', payload: { message: 'x' } }, 'invalid_request'],
    ['an unknown field', { cron: '* * * * *', task: 'echo', payload: { message: 'x' }, when: 'now' }, 'invalid_request'],
    ['an unknown task', { cron: '* * * * *', task: 'nope' }, 'unknown_task'],
    ['a payload that does not fit', { cron: '* * * * *', task: 'echo', payload: { message: 3 } }, 'invalid_payload'],
    ['a payload with NUL', { cron: '* * * * *', task: 'echo', payload: { message: '\u0000' } }, 'invalid_payload'],
    ['malformed JSON', '{"cron":', 'invalid_json'],
  ])('%s → 400 %s, nothing written', async (_name, body, code) => {
    const before = await countSchedules();
    const res = await t.call('PUT', '/v1/schedules/refused', { body });
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({ error: { code, message: expect.any(String) } });
    expect(await countSchedules()).toBe(before);
  });

  test('a bad name is 400; a static schedule is 409; a text body is 400', async () => {
    const body = { cron: '* * * * *', task: 'echo', payload: { message: 'x' } };
    for (const name of ['has%20space', 'x'.repeat(201), '%00', 'sl%2Fash']) {
      const res = await t.call('PUT', `/v1/schedules/${name}`, { body });
      expect(res.status, name).toBe(400);
      expect(await res.json()).toMatchObject({ error: { code: 'invalid_request' } });
    }
    const clash = await t.call('PUT', '/v1/schedules/static-report', { body });
    expect(clash.status).toBe(409);
    expect(await clash.json()).toMatchObject({ error: { code: 'conflict' } });
    const text = await t.call('PUT', '/v1/schedules/t', { body: JSON.stringify(body), headers: { 'content-type': 'text/plain' } });
    expect(text.status).toBe(400);
  });
});

describe('GET /v1/schedules', () => {
  test('lists static and dynamic schedules by name', async () => {
    const res = await t.call('GET', '/v1/schedules');
    expect(res.status).toBe(200);
    const { schedules } = (await res.json()) as any;
    expect(schedules.map((s: any) => [s.name, s.source])).toEqual([
      ['nightly', 'dynamic'],
      ['static-report', 'static'],
    ]);
    for (const s of schedules)
      expect(Object.keys(s)).toEqual(expect.arrayContaining(['name', 'cron', 'tz', 'task', 'nextRunAt', 'lastFiredAt']));
  });

  test('pages by name with limit and cursor, static schedules not stored yet included in order', async () => {
    for (const name of ['page-a', 'page-b', 'page-c', 'page-d', 'zz-last'])
      await t.call('PUT', `/v1/schedules/${name}`, { body: { cron: '0 4 * * *', task: 'echo', payload: { message: name } } });
    const all = ((await (await t.call('GET', '/v1/schedules')).json()) as any).schedules.map((s: any) => s.name);
    expect(all).toEqual(['nightly', 'page-a', 'page-b', 'page-c', 'page-d', 'static-report', 'zz-last']);

    const seen: string[][] = [];
    let cursor: string | null = null;
    do {
      const res = await t.call('GET', `/v1/schedules?limit=2${cursor ? `&cursor=${cursor}` : ''}`);
      expect(res.status).toBe(200);
      const page = (await res.json()) as { schedules: { name: string }[]; nextCursor: string | null };
      seen.push(page.schedules.map((s) => s.name));
      cursor = page.nextCursor;
    } while (cursor);
    expect(seen).toEqual([['nightly', 'page-a'], ['page-b', 'page-c'], ['page-d', 'static-report'], ['zz-last']]);

    // A prefix narrows the listing (one tenant's schedules, say), and pages the same way.
    const prefixed: string[][] = [];
    cursor = null;
    do {
      const res = await t.call('GET', `/v1/schedules?prefix=page-&limit=3${cursor ? `&cursor=${cursor}` : ''}`);
      const page = (await res.json()) as { schedules: { name: string }[]; nextCursor: string | null };
      prefixed.push(page.schedules.map((s) => s.name));
      cursor = page.nextCursor;
    } while (cursor);
    expect(prefixed).toEqual([['page-a', 'page-b', 'page-c'], ['page-d']]);
    // '_' and '%' are plain characters in a prefix, not patterns.
    expect(((await (await t.call('GET', '/v1/schedules?prefix=page_')).json()) as any).schedules).toEqual([]);
    expect(((await (await t.call('GET', '/v1/schedules?prefix=static-')).json()) as any).schedules.map((s: any) => s.name)).toEqual(['static-report']);

    for (const query of ['limit=0', 'limit=1001', 'limit=x', 'cursor=', 'cursor=bad%20name', 'prefix=', 'prefix=a%25', 'other=1']) {
      const res = await t.call('GET', `/v1/schedules?${query}`);
      expect(res.status, query).toBe(400);
      expect(((await res.json()) as any).error.code).toBe('invalid_request');
    }
    for (const name of ['page-a', 'page-b', 'page-c', 'page-d', 'zz-last']) await t.call('DELETE', `/v1/schedules/${name}`);
  });

  test('a put schedule fires through the tick route, and shows its last firing', async () => {
    await t.call('PUT', '/v1/schedules/minutely', { body: { cron: '* * * * *', task: 'echo', payload: { message: 'tick' } } });
    now = new Date('2030-01-01T00:10:30Z');
    const tick = await t.call('POST', '/v1/tick');
    expect(tick.status).toBe(200);
    expect(((await tick.json()) as any).fired).toBeGreaterThanOrEqual(1);
    const { schedules } = (await (await t.call('GET', '/v1/schedules')).json()) as any;
    const minutely = schedules.find((s: any) => s.name === 'minutely');
    expect(minutely).toMatchObject({ lastScheduledFor: '2030-01-01T00:10:00.000Z', lastJobId: expect.any(String) });
    const job = await t.call('GET', `/v1/jobs/${minutely.lastJobId}`);
    expect(((await job.json()) as any).job).toMatchObject({ task: 'echo', scheduleName: 'minutely', scheduledFor: '2030-01-01T00:10:00.000Z' });
  });
});

describe('GET /v1/schedules/:name', () => {
  test('one schedule, static (even before a tick stored it) or dynamic; 404 for none, and for names no schedule can have', async () => {
    await t.call('PUT', '/v1/schedules/one-tenant', { body: { cron: '0 5 * * *', task: 'echo', payload: { message: 'one' } } });
    await t.call('PUT', '/v1/schedules/one-tenant-extra', { body: { cron: '0 6 * * *', task: 'echo', payload: { message: 'two' } } });
    const res = await t.call('GET', '/v1/schedules/one-tenant');
    expect(res.status).toBe(200);
    expect(((await res.json()) as any).schedule).toMatchObject({ name: 'one-tenant', source: 'dynamic', cron: '0 5 * * *', payload: { message: 'one' } });
    expect(((await (await t.call('GET', '/v1/schedules/static-report')).json()) as any).schedule).toMatchObject({ name: 'static-report', source: 'static' });
    const missing = await t.call('GET', '/v1/schedules/one-tenan');
    expect(missing.status).toBe(404);
    expect(await missing.json()).toMatchObject({ error: { code: 'not_found' } });
    for (const name of ['%00', 'x'.repeat(201), 'a%20b']) expect((await t.call('GET', `/v1/schedules/${name}`)).status, name).toBe(404);
    expect((await t.call('GET', '/v1/schedules/one-tenant', { token: 'wrong' })).status).toBe(401);
    for (const name of ['one-tenant', 'one-tenant-extra']) await t.call('DELETE', `/v1/schedules/${name}`);
  });
});

describe('DELETE /v1/schedules/:name', () => {
  test('removes a dynamic schedule (200), then 404; a static one is 409; impossible names are 404', async () => {
    const res = await t.call('DELETE', '/v1/schedules/nightly');
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ name: 'nightly', deleted: true });
    const again = await t.call('DELETE', '/v1/schedules/nightly');
    expect(again.status).toBe(404);
    expect(await again.json()).toMatchObject({ error: { code: 'not_found' } });
    expect((await t.call('DELETE', '/v1/schedules/static-report')).status).toBe(409);
    for (const name of ['%00', 'x'.repeat(201), '%ED%A0%80', 'a%20b']) expect((await t.call('DELETE', `/v1/schedules/${name}`)).status, name).toBe(404);
  });
});
