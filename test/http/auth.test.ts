/** Every route × every kind of credential. */
import { afterAll, beforeAll, expect, test } from 'vitest';
import { bearerToken, safeEqual } from '../../src/http/auth.ts';
import { API_TOKEN, CRON_SECRET, createTestApp, type TestApp } from './helpers.ts';

let t: TestApp;
let jobId: string;
beforeAll(async () => {
  t = await createTestApp();
  jobId = (await t.skiplock.enqueue({ task: 'echo', payload: { message: 'auth' }, delayMs: 3_600_000 })).id;
});
afterAll(() => t.close());

type Access = 'api' | 'tick' | 'open';

/** Each route, its access class, and the status a right token gets. */
const ROUTES: [method: string, path: () => string, access: Access, ok: number | number[], body?: unknown][] = [
  ['POST', () => '/v1/jobs', 'api', 201, { task: 'echo', payload: { message: 'x' } }],
  // No tick runs the job here: the wait ends at its bound with 202. Auth comes before the query's validation.
  ['POST', () => '/v1/jobs?wait=0.05', 'api', 202, { task: 'echo', payload: { message: 'x' } }],
  ['POST', () => '/v1/jobs?wait=nope', 'api', 400, { task: 'echo', payload: { message: 'x' } }],
  ['POST', () => '/v1/jobs/batch', 'api', 201, { jobs: [{ task: 'echo', payload: { message: 'x' } }] }],
  ['GET', () => `/v1/jobs/${jobId}`, 'api', 200],
  ['GET', () => '/v1/jobs?limit=2', 'api', 200],
  ['GET', () => '/v1/jobs?status=waiting', 'api', 200],
  ['GET', () => '/v1/jobs/123456789', 'api', 404],
  ['POST', () => `/v1/jobs/${jobId}/retry`, 'api', 409],
  ['POST', () => '/v1/jobs/123456789/cancel', 'api', 404],
  ['POST', () => '/v1/jobs/retry-dead', 'api', 200, { task: 'poison' }],
  ['PATCH', () => `/v1/jobs/${jobId}`, 'api', 200, { delayMs: 3_600_000 }],
  ['PATCH', () => '/v1/jobs/123456789', 'api', 404, { delayMs: 0 }],
  ['GET', () => '/v1/tasks', 'api', 200],
  ['POST', () => '/v1/tasks/poison/pause', 'api', 200],
  ['POST', () => '/v1/tasks/poison/resume', 'api', 200],
  ['GET', () => '/v1/stats', 'api', 200],
  ['GET', () => '/v1/schedules', 'api', 200],
  // Created, then replaced.
  ['PUT', () => '/v1/schedules/nightly', 'api', [201, 200], { cron: '0 3 * * *', task: 'echo', payload: { message: 'n' } }],
  ['GET', () => '/v1/schedules/nightly', 'api', [200, 404]],
  // Deleted, then not there any more.
  ['DELETE', () => '/v1/schedules/nightly', 'api', [200, 404]],
  ['GET', () => '/v1/nope', 'api', 404],
  ['GET', () => '/metrics', 'api', 200],
  ['GET', () => '/v1/tick', 'tick', 200],
  ['POST', () => '/v1/tick', 'tick', 200],
  ['GET', () => '/healthz', 'open', 200],
  ['GET', () => '/openapi.json', 'open', 200],
  ['GET', () => '/docs', 'open', 200],
];

const CREDENTIALS: [name: string, header: string | null, accepted: Access[]][] = [
  ['no token', null, ['open']],
  ['a wrong token', 'Bearer wrong-token', ['open']],
  ['a token one character short', `Bearer ${API_TOKEN.slice(0, -1)}`, ['open']],
  ['the token with a suffix', `Bearer ${API_TOKEN}x`, ['open']],
  ['the token without "Bearer"', API_TOKEN, ['open']],
  ['the token as Basic', `Basic ${API_TOKEN}`, ['open']],
  ['"Bearer" alone', 'Bearer ', ['open']],
  ['the right API token', `Bearer ${API_TOKEN}`, ['api', 'tick', 'open']],
  ['the API token, lowercase scheme', `bearer ${API_TOKEN}`, ['api', 'tick', 'open']],
  ['CRON_SECRET', `Bearer ${CRON_SECRET}`, ['tick', 'open']],
];

const cases = ROUTES.flatMap((route) => CREDENTIALS.map((cred) => [`${route[0]} ${route[1]()}`, cred[0], route, cred] as const));

test.each(cases)('%s with %s', async (_route, _cred, [method, path, access, ok, body], [, header, accepted]) => {
  const headers: Record<string, string> = header === null ? {} : { authorization: header };
  const res = await t.call(method, path(), { token: null, headers, ...(body === undefined ? {} : { body }) });
  if (accepted.includes(access)) {
    expect(Array.isArray(ok) ? ok : [ok]).toContain(res.status);
  } else {
    expect(res.status).toBe(401);
    expect(res.headers.get('www-authenticate')).toBe('Bearer');
    expect(await res.json()).toMatchObject({ error: { code: 'unauthorized', message: expect.any(String) } });
  }
});

test('an app without CRON_SECRET accepts only the API token on the tick route', async () => {
  const { createApp } = await import('../../src/http/app.ts');
  const app = createApp({ skiplock: t.skiplock, apiToken: API_TOKEN, cronSecret: '', tick: { untilIdle: true } });
  expect((await app.request('/v1/tick', { headers: { authorization: 'Bearer ' } })).status).toBe(401);
  expect((await app.request('/v1/tick', { headers: { authorization: `Bearer ${CRON_SECRET}` } })).status).toBe(401);
  expect((await app.request('/v1/tick', { headers: { authorization: `Bearer ${API_TOKEN}` } })).status).toBe(200);
});

test('safeEqual and bearerToken', async () => {
  expect(await safeEqual('abc', 'abc')).toBe(true);
  expect(await safeEqual('abc', 'abd')).toBe(false);
  expect(await safeEqual('abc', 'abcd')).toBe(false);
  expect(await safeEqual('', '')).toBe(true);
  expect(bearerToken('Bearer  tok ')).toBe('tok');
  expect(bearerToken('Bearer a b')).toBeUndefined();
  expect(bearerToken(undefined)).toBeUndefined();
});
