/**
 * Issue 30 item 4: input that PostgreSQL refuses (U+0000, lone UTF-16 surrogates, numbers beyond
 * bigint) is refused at the edge with a 4xx and writes nothing, on every route that takes it: a
 * callback POST (whose caller is an outside party: its wait stays open for a correct POST), the
 * cursors and filters of GET /v1/events and of the dashboard's lists. A property test sends
 * strings holding NUL and lone surrogates to the callback, events and dashboard routes.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { z } from 'zod';
import { STATUS_OF } from '../../src/http/errors.ts';
import { defineTask } from '../../src/runtime/tasks/task.ts';
import { statement } from '../../src/store/sql.ts';
import { echo, poison } from '../../src/tasks/examples.ts';
import { getPage, logIn } from './dashboard-support.ts';
import { createTestApp, type TestApp } from './helpers.ts';

const urls = new Map<string, string>();
const approval = defineTask({
  name: 'approval',
  payload: z.object({ order: z.string() }),
  timeoutMs: 2_000,
  handler: async (p, ctx) => {
    const { url } = await ctx.createCallback('approve', { timeoutMs: 600_000 });
    urls.set(p.order, url);
    return ctx.waitForCallback('approve');
  },
});

let t: TestApp;
let cookie: string;
beforeAll(async () => {
  t = await createTestApp({
    tasks: [approval, echo, poison],
    skiplock: { callbacks: { secret: 'a-callback-secret-of-some-length', publicUrl: 'https://jobs.example.com' } },
  });
  cookie = await logIn(t);
});
afterAll(() => t.close());

const tick = () => t.skiplock.tick({ untilIdle: true, budgetMs: 5_000, pollIntervalMs: 10 });

/** Every row skiplock keeps, as one hash: any write changes it. */
async function snapshot(): Promise<string> {
  const parts: string[] = [];
  for (const table of ['skiplock.job', 'skiplock.job_step', 'skiplock.event']) {
    const [row] = await t.db.sql.query(statement(`SELECT count(*)::int AS n, coalesce(md5(string_agg(x::text, ',' ORDER BY x::text)), '') AS h FROM ${table} x`));
    parts.push(`${table}:${row!.n}:${row!.h}`);
  }
  return parts.join('|');
}

/** A job WAITING on its callback, and the path of its callback URL. */
async function waitingCallback(order: string): Promise<{ id: string; path: string }> {
  const job = await t.skiplock.enqueue({ task: 'approval', payload: { order } });
  await tick();
  const [step] = await t.db.sql.query(statement(`SELECT status FROM skiplock.job_step WHERE job_id = $1 AND id = 'approve'`, [job.id]));
  expect(step?.status).toBe('waiting');
  return { id: job.id, path: new URL(urls.get(order)!).pathname };
}

describe('a callback POST holding what PostgreSQL cannot store', () => {
  test('\\u0000 or a lone surrogate anywhere in the JSON: 400, nothing written, and the wait is still open for a correct POST', async () => {
    const { id, path } = await waitingCallback('o-nul');
    const bodies = [
      '{"note":"a\\u0000b"}',
      '"\\u0000"',
      '{"note":"\\ud800"}',
      '["x\\udfff"]',
      '{"a\\u0000":1}',
      '{"deep":[{"deeper":{"s":"\\udbff\\u0041"}}]}',
    ];
    for (const body of bodies) {
      const before = await snapshot();
      const res = await t.call('POST', path, { body, token: null });
      const answer = (await res.json()) as { error: { code: string } };
      expect([body, res.status, answer.error.code]).toEqual([body, 400, 'invalid_request']);
      expect(await snapshot()).toBe(before);
    }
    const done = await t.call('POST', path, { body: { approved: true }, token: null });
    expect(done.status).toBe(200);
    await tick();
    const job = (await t.skiplock.getJob(id))!;
    expect(job.status).toBe('DONE');
    expect(job.result).toEqual({ data: { approved: true } });
  });

  test('the library refuses it too (SkiplockError invalid_request), after the token', async () => {
    const { path } = await waitingCallback('o-lib');
    const token = path.split('/').pop()!;
    await expect(t.skiplock.completeCallback(token, { s: 'a\u0000' })).rejects.toMatchObject({ code: 'invalid_request' });
    await expect(t.skiplock.completeCallback(token, { s: '\ud800' })).rejects.toMatchObject({ code: 'invalid_request' });
    await expect(t.skiplock.completeCallback(token, { n: 10n })).rejects.toMatchObject({ code: 'invalid_request' });
    // A wrong token is unknown whatever the data.
    expect(await t.skiplock.completeCallback(`${token}x`, { s: 'a\u0000' })).toBe('unknown');
    expect(await t.skiplock.completeCallback(token, { s: 'fine' })).toBe('completed');
  });
});

describe('cursors and filters of event and job lists', () => {
  test('GET /v1/events: a cursor beyond bigint, or not a cursor at all, is 400 invalid_request (not a 500, not silently the first page)', async () => {
    for (const cursor of ['9223372036854775808', '9999999999999999999', '99999999999999999999', '0', '-1', 'abc', '1e3', '007', '1.5'])
      expect([cursor, (await t.call('GET', `/v1/events?cursor=${cursor}`)).status]).toEqual([cursor, 400]);
    expect((await t.call('GET', '/v1/events?cursor=9223372036854775807')).status).toBe(200);
  });

  test('the library: listEvents and listJobs refuse a bad cursor, name, key or task with invalid_request', async () => {
    for (const query of [{ cursor: '9223372036854775808' }, { cursor: 'x' }, { name: 'a\u0000' }, { name: 'a b' }, { key: 'k\u0000' }, { key: '\udc00' }])
      await expect(t.skiplock.listEvents(query)).rejects.toMatchObject({ code: 'invalid_request' });
    for (const task of ['a\u0000b', '\u0000', 'x\ud800'])
      await expect(t.skiplock.listJobs({ task })).rejects.toMatchObject({ code: 'invalid_request' });
  });

  test('dashboard pages: a cursor beyond bigint or a NUL in a filter is a 400 page, not a 500', async () => {
    const paths = [
      '/events?cursor=9999999999999999999',
      '/events?cursor=9223372036854775808',
      '/events?name=%00',
      '/events?name=a%00b',
      '/jobs?task=%00',
      '/jobs?task=a%00b',
      '/jobs?cursor=9999999999999999999',
      '/dead?task=%00',
      '/dead?task=a%00b',
      '/jobs/bulk?action=retry&task=a%00b',
      '/jobs/9999999999999999999',
      '/schedules?prefix=%00',
      '/schedules?cursor=%00',
    ];
    for (const path of paths) {
      const res = await getPage(t, path, cookie);
      expect([path, res.status]).toEqual([path, expect.any(Number)]);
      expect([path, res.status < 500]).toEqual([path, true]);
    }
    for (const path of paths.slice(0, 10)) expect([path, (await getPage(t, path, cookie)).status]).toEqual([path, 400]);
  });
});

// ---- property: strings holding NUL and lone surrogates, on the callback, events and dashboard routes

const nasty = fc.oneof(
  fc.constantFrom('\u0000', 'a\u0000', '\ud800', '\udfff', 'x\ud83d', '\ude00y', '\u0000\ud800'),
  fc
    .tuple(fc.string({ maxLength: 6 }), fc.constantFrom('\u0000', '\ud800', '\udbff', '\udc00', '\udfff'), fc.string({ maxLength: 6 }))
    .map(([a, bad, b]) => a + bad + b),
);
/** Any JSON value with a nasty string somewhere in it (a value or a key). */
const nastyJson = fc.oneof(
  nasty,
  fc.tuple(fc.dictionary(fc.string({ maxLength: 4 }), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 3 }), nasty, nasty).map(([o, k, v]) => ({ ...o, [k]: 1, ok: v })),
  fc.tuple(fc.array(fc.jsonValue({ maxDepth: 1 }), { maxLength: 3 }), nasty).map(([a, s]) => [...a, { s }]),
);
/** A query value: percent-encoded UTF-8 of the string (a lone surrogate cannot be: its bytes then), or a number past bigint. */
function queryValue(text: string): string {
  try {
    return encodeURIComponent(text);
  } catch {
    return encodeURIComponent(text.replace(/[\ud800-\udfff]/g, '')) + '%ED%A0%80';
  }
}
const bigNumber = fc.bigInt({ min: 2n ** 63n - 2n, max: 10n ** 25n }).map(String);

test('property: NUL and lone surrogates (and numbers past bigint) never reach PostgreSQL: 4xx, nothing written', { timeout: 120_000 }, async () => {
  const { path } = await waitingCallback('o-prop');
  const runs = Number(process.env.FUZZ_RUNS ?? 300);
  const request = fc.oneof(
    nastyJson.map((data) => ({ kind: 'callback' as const, body: JSON.stringify(data) })),
    fc.record({ name: fc.oneof(nasty, fc.constant('ok.name')), key: fc.option(nasty, { nil: undefined }), data: fc.option(nastyJson, { nil: undefined }), idempotencyKey: fc.option(nasty, { nil: undefined }) })
      .filter((e) => e.name !== 'ok.name' || e.key !== undefined || e.data !== undefined || e.idempotencyKey !== undefined)
      .map((event) => ({ kind: 'send' as const, body: JSON.stringify(event) })),
    fc.tuple(fc.constantFrom('name', 'key', 'cursor', 'task', 'status'), fc.oneof(nasty.map(queryValue), bigNumber)).map(([param, value]) => ({ kind: 'list' as const, path: `/v1/${param === 'task' || param === 'status' ? 'jobs' : 'events'}?${param}=${value}` })),
    fc.tuple(fc.constantFrom('/events?name=', '/events?cursor=', '/jobs?task=', '/jobs?cursor=', '/dead?task=', '/dead?cursor=', '/schedules?prefix=', '/schedules?cursor=', '/jobs/bulk?action=retry&task='), fc.oneof(nasty.map(queryValue), bigNumber)).map(([at, value]) => ({ kind: 'page' as const, path: at + value })),
  );
  await fc.assert(
    fc.asyncProperty(request, async (r) => {
      const before = await snapshot();
      const res =
        r.kind === 'callback' ? await t.call('POST', path, { body: r.body, token: null })
        : r.kind === 'send' ? await t.call('POST', '/v1/events', { body: r.body })
        : r.kind === 'list' ? await t.call('GET', r.path)
        : await getPage(t, r.path, cookie);
      const text = await res.text();
      expect(res.status, `${JSON.stringify(r)} → ${text.slice(0, 300)}`).toBeLessThan(500);
      if (r.kind !== 'page' && res.status >= 400) {
        const { error } = JSON.parse(text) as { error: { code: keyof typeof STATUS_OF } };
        expect(STATUS_OF[error.code]).toBe(res.status);
      }
      // Every callback and send here holds a nasty string: refused, so nothing is written.
      if (r.kind === 'callback' || r.kind === 'send') expect([r.body, res.status]).toEqual([r.body, 400]);
      expect(await snapshot()).toBe(before);
    }),
    { numRuns: runs },
  );
  // And the wait is still open.
  expect((await t.call('POST', path, { body: { ok: true }, token: null })).status).toBe(200);
});
