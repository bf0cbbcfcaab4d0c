/**
 * /openapi.json as third-party tools read it (issue 30, item 12): it compiles with Ajv 8 in the
 * dialect it declares, every operation has a unique operationId, it names its server, the
 * callback route needs no token, the rules the server enforces are in it, and the bodies of real
 * calls validate against their documented schemas, `required` included. A known path with a
 * method it does not serve is 405 with `Allow`.
 *
 * Ajv is a devDependency (pinned, without ajv-formats): the one format the document uses,
 * date-time, is checked here.
 */
import { createRequire } from 'node:module';
import type { Options, ValidateFunction } from 'ajv';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import * as z from 'zod';
import { createApp } from '../../src/http/app.ts';
import { mount } from '../../src/http/mount.ts';
import { defineSchedule } from '../../src/runtime/schedules/definition.ts';
import { defineTask } from '../../src/runtime/tasks/task.ts';
import { exampleTasks } from '../../src/tasks/examples.ts';
import { API_TOKEN, createTestApp, type TestApp } from './helpers.ts';

/** A workflow with every kind of step a job page shows: a step, a step without output, an event wait, an invoked child. */
const workflow = defineTask({
  name: 'workflow',
  payload: z.object({ order: z.string() }),
  handler: async (p, ctx) => {
    const first = await ctx.step('first', async () => ({ n: 1 }));
    await ctx.step('nothing', async () => undefined);
    ctx.progress({ half: true });
    const child = await ctx.invoke('child', 'echo', { message: 'from the workflow' });
    const paid = await ctx.waitForEvent('paid', { event: 'order.paid', key: p.order, timeoutMs: 3_600_000 });
    return { first, child, paid };
  },
});

/** The part of Ajv used here; Ajv is CommonJS, its classes are its modules' `default`. */
interface AjvCore {
  addVocabulary(keywords: string[]): unknown;
  addFormat(name: string, format: (text: string) => boolean): unknown;
  addSchema(schema: object, key: string): unknown;
  compile(schema: object): ValidateFunction;
}
type AjvClass = new (options: Options) => AjvCore;
const require = createRequire(import.meta.url);
const Ajv = (require('ajv') as { default: AjvClass }).default;
const Ajv2020 = (require('ajv/dist/2020.js') as { default: AjvClass }).default;

const METHODS = ['get', 'put', 'post', 'delete', 'patch', 'options', 'head', 'trace'] as const;

let t: TestApp;
let doc: any;
let ajv: AjvCore;
beforeAll(async () => {
  t = await createTestApp({
    tasks: [...exampleTasks, workflow],
    skiplock: { schedules: [defineSchedule({ name: 'static-report', cron: '0 6 * * *', task: 'echo', payload: { message: 'static' } })] },
  });
  doc = await (await t.call('GET', '/openapi.json', { token: null })).json();
  ajv = ajvFor(doc);
});
afterAll(() => t.close());

/** An Ajv of the document's dialect (3.0: draft-07 with `nullable`; 3.1: 2020-12), strict, with the document added as `openapi.json`. */
function ajvFor(document: any): AjvCore {
  // Ajv's default strictness (unknown keywords and formats refused), and types too.
  const options = { allErrors: true, strictTypes: true, allowUnionTypes: true } as const;
  const instance: AjvCore = String(document.openapi).startsWith('3.1') ? new Ajv2020(options) : new Ajv(options);
  // OpenAPI's own keywords, in schemas and at the document's root: annotations, nothing to check.
  instance.addVocabulary(['example', 'discriminator', 'xml', 'externalDocs', 'openapi', 'info', 'servers', 'paths', 'components', 'tags', 'security', 'webhooks', 'jsonSchemaDialect']);
  instance.addFormat('date-time', (text: string) => /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$/i.test(text) && !Number.isNaN(Date.parse(text)));
  instance.addSchema(document, 'openapi.json');
  return instance;
}

const compiled = new Map<string, ValidateFunction>();
/** The validator of a schema of the document, by its JSON pointer. */
function validator(pointer: string): ValidateFunction {
  const known = compiled.get(pointer);
  if (known) return known;
  const v = ajv.compile({ $ref: `openapi.json#${pointer}` });
  compiled.set(pointer, v);
  return v;
}
const escapePointer = (segment: string) => segment.replaceAll('~', '~0').replaceAll('/', '~1');

/** Every schema of the document (components, parameters, request and response bodies), as JSON pointers. */
function everySchema(document: any): string[] {
  const pointers = Object.keys(document.components?.schemas ?? {}).map((name) => `/components/schemas/${escapePointer(name)}`);
  for (const [path, item] of Object.entries<any>(document.paths)) {
    for (const method of METHODS) {
      const op = item[method];
      if (!op) continue;
      const base = `/paths/${escapePointer(path)}/${method}`;
      (op.parameters ?? []).forEach((p: any, i: number) => p.schema && pointers.push(`${base}/parameters/${i}/schema`));
      if (op.requestBody?.content?.['application/json']) pointers.push(`${base}/requestBody/content/application~1json/schema`);
      for (const [status, r] of Object.entries<any>(op.responses ?? {}))
        if (r.content?.['application/json']) pointers.push(`${base}/responses/${status}/content/application~1json/schema`);
    }
  }
  return pointers;
}

/** The response's JSON body, after checking it against the schema documented for its status. */
async function documented(res: Response, method: string, path: string): Promise<any> {
  const op = doc.paths[path]?.[method.toLowerCase()];
  expect(op, `${method} ${path} is in the document`).toBeDefined();
  const status = String(res.status);
  expect(Object.keys(op.responses), `${method} ${path}: ${status} is documented`).toContain(status);
  const body = await res.json();
  const validate = validator(`/paths/${escapePointer(path)}/${method.toLowerCase()}/responses/${status}/content/application~1json/schema`);
  const ok = validate(body);
  expect(ok ? [] : validate.errors, `${method} ${path} → ${status}: ${JSON.stringify(body).slice(0, 400)}`).toEqual([]);
  return body;
}

/** A schema of the document with its `$ref`s and `allOf`s followed: the properties and required of an object. */
function objectShape(schema: any): { properties: Record<string, any>; required: string[] } {
  if (schema.$ref) return objectShape(doc.components.schemas[schema.$ref.replace('#/components/schemas/', '')]);
  const parts = [schema, ...(schema.allOf ?? []).map(objectShape)];
  return {
    properties: Object.assign({}, ...parts.map((p) => p.properties ?? {})),
    required: parts.flatMap((p) => p.required ?? []),
  };
}

/** Keys of a real object that its component does not document, or documents as optional. */
function undocumentedOrOptional(sample: Record<string, unknown>, component: string, optional: string[] = []) {
  const shape = objectShape({ $ref: `#/components/schemas/${component}` });
  return {
    undocumented: Object.keys(sample).filter((k) => !(k in shape.properties)),
    notRequired: Object.keys(sample).filter((k) => !shape.required.includes(k) && !optional.includes(k)),
  };
}

async function tick() {
  const res = await t.call('POST', '/v1/tick');
  return documented(res, 'POST', '/v1/tick');
}

describe('the document', () => {
  test('compiles with Ajv 8 in the dialect it declares (3.1: JSON Schema 2020-12), every schema of it', () => {
    expect(doc.openapi).toMatch(/^3\.1\.\d+$/);
    const pointers = everySchema(doc);
    expect(pointers.length).toBeGreaterThan(60);
    for (const pointer of pointers) expect(() => validator(pointer), pointer).not.toThrow();
    // JSON-any fields are `{}` (any value, null included), never a bare `nullable`.
    expect(JSON.stringify(doc)).not.toContain('"nullable"');
    expect(doc.components.schemas.Job.properties.payload).not.toHaveProperty('type');
  });

  test('every operation has a unique operationId, and the document names its server', () => {
    const ids = Object.values<any>(doc.paths).flatMap((item) => METHODS.filter((m) => item[m]).map((m) => item[m].operationId));
    expect(ids).toHaveLength(27);
    expect(ids.every((id) => typeof id === 'string' && /^[a-z][A-Za-z]+$/.test(id)), ids.join(', ')).toBe(true);
    expect(new Set(ids).size).toBe(ids.length);
    expect(doc.servers).toEqual([{ url: '/', description: expect.any(String) }]);
  });

  test('under a mount prefix, the server is the prefix', async () => {
    const mounted = mount(createApp({ skiplock: t.skiplock, apiToken: API_TOKEN }), '/api/skiplock');
    const inner = (await (await mounted.fetch(new Request('http://x.test/api/skiplock/openapi.json'))).json()) as any;
    expect(inner.servers).toEqual([{ url: '/api/skiplock', description: expect.any(String) }]);
    // The unmounted document is unchanged by it.
    expect(((await (await t.call('GET', '/openapi.json')).json()) as any).servers[0].url).toBe('/');
  });

  test('the callback route needs no token (security: []); every other /v1 route the bearer token', () => {
    expect(doc.paths['/v1/callbacks/{token}'].post.security).toEqual([]);
    for (const [path, item] of Object.entries<any>(doc.paths))
      for (const m of METHODS)
        if (item[m] && path.startsWith('/v1/') && path !== '/v1/callbacks/{token}') expect(item[m].security, `${m} ${path}`).toContainEqual({ bearer: [] });
  });

  test('the dashboard is not in it', () => {
    expect(Object.keys(doc.paths).filter((p) => !p.startsWith('/v1/') && !['/healthz', '/metrics'].includes(p))).toEqual([]);
  });

  test('fields the server always sends are required', () => {
    const all = (name: string) => Object.keys(doc.components.schemas[name].properties);
    for (const name of ['Job', 'AttemptRecord', 'Event', 'Schedule', 'Task', 'Stats', 'TickResult', 'SendEventResult', 'JobChild'])
      expect(new Set(doc.components.schemas[name].required), name).toEqual(new Set(all(name)));
    const step = doc.components.schemas.JobStep;
    expect(new Set(step.required)).toEqual(new Set(all('JobStep').filter((k) => !k.startsWith('event'))));
    for (const [name, field] of [['Job', 'payload'], ['Job', 'result'], ['Job', 'progress'], ['JobStep', 'output'], ['Event', 'data'], ['Schedule', 'payload'], ['Schedule', 'state'], ['AttemptRecord', 'progress']])
      expect(doc.components.schemas[name!].required, `${name}.${field}`).toContain(field);
  });
});

describe('rules the server enforces are in the document', () => {
  /** The server's answer and the document's verdict on one request body. */
  async function both(method: string, path: string, template: string, body: unknown) {
    const res = await t.call(method, path, { body });
    const validate = validator(`/paths/${escapePointer(template)}/${method.toLowerCase()}/requestBody/content/application~1json/schema`);
    return { status: res.status, documentAccepts: validate(body) };
  }

  test.each([
    ['both runAt and delayMs', { task: 'echo', payload: { message: 'x' }, runAt: '2030-01-01T00:00:00Z', delayMs: 5 }, false],
    ['debounce with delayMs', { task: 'echo', payload: { message: 'x' }, delayMs: 5, debounce: { key: 'k', delayMs: 10 } }, false],
    ['debounce with runAt', { task: 'echo', payload: { message: 'x' }, runAt: '2030-01-01T00:00:00Z', debounce: { key: 'k', delayMs: 10 } }, false],
    ['debounce with idempotencyKey', { task: 'echo', payload: { message: 'x' }, idempotencyKey: 'i', debounce: { key: 'k', delayMs: 10 } }, false],
    ['a malformed traceparent', { task: 'echo', payload: { message: 'x' }, traceparent: '00-abc-def-01' }, false],
    ['an all-zero trace id', { task: 'echo', payload: { message: 'x' }, traceparent: `00-${'0'.repeat(32)}-b7ad6b7169203331-01` }, false],
    ['version ff', { task: 'echo', payload: { message: 'x' }, traceparent: 'ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01' }, false],
    ['a valid traceparent', { task: 'echo', payload: { message: 'x' }, traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01' }, true],
    ['debounce alone', { task: 'echo', payload: { message: 'x' }, debounce: { key: 'doc-rule', delayMs: 3_600_000 } }, true],
  ])('POST /v1/jobs, %s: the document agrees with the server', async (_name, body, valid) => {
    const { status, documentAccepts } = await both('POST', '/v1/jobs', '/v1/jobs', body);
    expect(documentAccepts).toBe(valid);
    expect(status < 300).toBe(valid);
  });

  test.each([
    ['an empty body', {}, false],
    ['both runAt and delayMs', { runAt: '2030-01-01T00:00:00Z', delayMs: 5 }, false],
    ['a priority', { priority: 3 }, true],
  ])('PATCH /v1/jobs/{id}, %s: the document agrees with the server', async (_name, body, valid) => {
    const { job } = (await (await t.call('POST', '/v1/jobs', { body: { task: 'echo', payload: { message: 'patch me' }, delayMs: 3_600_000 } })).json()) as any;
    const { status, documentAccepts } = await both('PATCH', `/v1/jobs/${job.id}`, '/v1/jobs/{id}', body);
    expect(documentAccepts).toBe(valid);
    expect(status < 300).toBe(valid);
  });

  test.each([
    ['none of cron, every, daily', { task: 'echo', payload: { message: 'x' } }, false],
    ['cron and every', { cron: '0 3 * * *', every: '1h', task: 'echo', payload: { message: 'x' } }, false],
    ['every with tz', { every: '1h', tz: 'Europe/Oslo', task: 'echo', payload: { message: 'x' } }, false],
    ['cron', { cron: '0 3 * * *', task: 'echo', payload: { message: 'x' } }, true],
    ['daily', { daily: ['02:30'], task: 'echo', payload: { message: 'x' } }, true],
  ])('PUT /v1/schedules/{name}, %s: the document agrees with the server', async (_name, body, valid) => {
    const { status, documentAccepts } = await both('PUT', '/v1/schedules/doc-rules', '/v1/schedules/{name}', body);
    expect(documentAccepts).toBe(valid);
    expect(status < 300).toBe(valid);
  });

  test.each([
    ['an empty filter', { action: 'cancel', where: {} }, false],
    ['fromStep without restart', { action: 'cancel', where: { task: 'nope' }, fromStep: 'a' }, false],
    ['a filter', { action: 'cancel', where: { task: 'nope' } }, true],
  ])('POST /v1/jobs/bulk, %s: the document agrees with the server', async (_name, body, valid) => {
    const { status, documentAccepts } = await both('POST', '/v1/jobs/bulk', '/v1/jobs/bulk', body);
    expect(documentAccepts).toBe(valid);
    expect(status < 300).toBe(valid);
  });

  test('the schedule name has its pattern in the path of each schedule route', async () => {
    for (const m of ['get', 'put', 'delete']) {
      const param = doc.paths['/v1/schedules/{name}'][m].parameters.find((p: any) => p.name === 'name');
      expect(param.schema.pattern, m).toBe('^[\\w.:-]{1,200}$');
    }
    expect((await t.call('PUT', '/v1/schedules/bad%20name', { body: { cron: '0 3 * * *', task: 'echo', payload: { message: 'x' } } })).status).toBe(400);
  });

  test('GET /healthz?deep=yes: its 400 is documented', async () => {
    await documented(await t.call('GET', '/healthz?deep=yes', { token: null }), 'GET', '/healthz');
  });
});

describe('GET /v1/jobs/{id}/stream (Server-Sent Events)', () => {
  const op = () => doc.paths['/v1/jobs/{id}/stream'].get;
  const param = (name: string, where: string) => op().parameters.find((p: any) => p.name === name && p.in === where);

  test('its parameters: the id, name, after and token in the query, Last-Event-ID; the bearer token or the stream token', () => {
    expect(op().operationId).toBe('streamJob');
    expect(param('id', 'path')).toMatchObject({ required: true, schema: { type: 'string' } });
    for (const [name, where] of [['name', 'query'], ['after', 'query'], ['token', 'query'], ['last-event-id', 'header']] as const)
      expect(param(name, where), `${where} ${name}`).toMatchObject({ required: false, schema: { type: 'string' } });
    expect(op().security).toEqual([{ bearer: [] }, { streamToken: [] }]);
    expect(doc.components.securitySchemes.streamToken).toMatchObject({ type: 'apiKey', in: 'query', name: 'token' });
  });

  test('its 200 is text/event-stream, described (id = seq, data = JSON, end, Last-Event-ID); 400, 401, 404 documented', () => {
    const responses = op().responses;
    expect(Object.keys(responses['200'].content)).toEqual(['text/event-stream']);
    expect(responses['200'].description).toMatch(/event: end/);
    expect(responses['200'].description).toMatch(/Last-Event-ID/);
    for (const status of ['400', '401', '404']) expect(responses[status].content['application/json'].schema).toEqual({ $ref: '#/components/schemas/Error' });
  });

  test.each([
    ['name', 'default', true],
    ['name', 'a.b:c-d_e', true],
    ['name', 'bad name', false],
    ['name', 'x'.repeat(65), false],
    ['after', '0', true],
    ['after', '12', true],
    ['after', '-1', false],
    ['after', 'x', false],
  ])('?%s=%s: the document agrees with the server', async (name, value, valid) => {
    const { job } = (await (await t.call('POST', '/v1/jobs', { body: { task: 'echo', payload: { message: 'streamless' } } })).json()) as any;
    await tick();
    const res = await t.call('GET', `/v1/jobs/${job.id}/stream?${name}=${encodeURIComponent(value)}`);
    await res.body?.cancel();
    expect(res.status === 200).toBe(valid);
    expect(ajv.compile(param(name, 'query').schema)(value)).toBe(valid);
  });
});

describe('real responses validate against their documented schemas', () => {
  test('enqueue, batch, get, list, patch, cancel, retry, restart, bulk, stats, tasks, wake, tick, health', async () => {
    const { job } = await documented(await t.call('POST', '/v1/jobs', { body: { task: 'echo', payload: { message: 'hi' } } }), 'POST', '/v1/jobs');
    expect(undocumentedOrOptional(job, 'Job')).toEqual({ undocumented: [], notRequired: [] });
    await documented(await t.call('POST', '/v1/jobs', { body: { task: 'echo', payload: { message: 'hi' }, idempotencyKey: 'doc-1' } }), 'POST', '/v1/jobs');
    await documented(await t.call('POST', '/v1/jobs', { body: { task: 'echo', payload: { message: 'hi' }, idempotencyKey: 'doc-1' } }), 'POST', '/v1/jobs');
    await documented(await t.call('POST', '/v1/jobs?wait=0', { body: { task: 'echo', payload: { message: 'wait' }, delayMs: 3_600_000 } }), 'POST', '/v1/jobs');
    const { jobs } = await documented(
      await t.call('POST', '/v1/jobs/batch', { body: { jobs: [{ task: 'poison', payload: {} }, { task: 'flaky', payload: { failTimes: 1 } }, { task: 'echo', payload: { message: 'later' }, delayMs: 3_600_000 }] } }),
      'POST',
      '/v1/jobs/batch',
    );
    await tick();
    await documented(await t.call('GET', `/v1/jobs/${job.id}`), 'GET', '/v1/jobs/{id}');
    const dead = await documented(await t.call('GET', `/v1/jobs/${jobs[0].id}`), 'GET', '/v1/jobs/{id}');
    expect(dead.job).toMatchObject({ status: 'DEAD', history: [expect.objectContaining({ outcome: expect.any(String) })] });
    expect(undocumentedOrOptional(dead.job.history[0], 'AttemptRecord')).toEqual({ undocumented: [], notRequired: [] });
    const page = await documented(await t.call('GET', '/v1/jobs?limit=2'), 'GET', '/v1/jobs');
    expect(page.nextCursor).not.toBeNull();
    await documented(await t.call('GET', `/v1/jobs?cursor=${page.nextCursor}&status=dead`), 'GET', '/v1/jobs');
    await documented(await t.call('PATCH', `/v1/jobs/${jobs[2].id}`, { body: { priority: 2 } }), 'PATCH', '/v1/jobs/{id}');
    await documented(await t.call('POST', `/v1/jobs/${jobs[2].id}/cancel`), 'POST', '/v1/jobs/{id}/cancel');
    await documented(await t.call('POST', `/v1/jobs/${jobs[2].id}/cancel`), 'POST', '/v1/jobs/{id}/cancel');
    await documented(await t.call('POST', `/v1/jobs/${jobs[2].id}/retry`), 'POST', '/v1/jobs/{id}/retry');
    await documented(await t.call('POST', `/v1/jobs/${jobs[0].id}/restart`, { body: {} }), 'POST', '/v1/jobs/{id}/restart');
    await documented(await t.call('POST', '/v1/jobs/bulk', { body: { action: 'retry', where: { task: 'poison' }, dryRun: true } }), 'POST', '/v1/jobs/bulk');
    await documented(await t.call('POST', '/v1/jobs/retry-dead', { body: { task: 'poison' } }), 'POST', '/v1/jobs/retry-dead');
    await documented(await t.call('GET', '/v1/jobs/999999999'), 'GET', '/v1/jobs/{id}');
    await documented(await t.call('POST', '/v1/jobs', { body: { task: 'nope' } }), 'POST', '/v1/jobs');
    const stats = await documented(await t.call('GET', '/v1/stats'), 'GET', '/v1/stats');
    expect(undocumentedOrOptional(stats, 'Stats')).toEqual({ undocumented: [], notRequired: [] });
    const { tasks } = await documented(await t.call('GET', '/v1/tasks'), 'GET', '/v1/tasks');
    expect(undocumentedOrOptional(tasks[0], 'Task')).toEqual({ undocumented: [], notRequired: [] });
    await documented(await t.call('POST', '/v1/tasks/echo/pause'), 'POST', '/v1/tasks/{name}/pause');
    await documented(await t.call('POST', '/v1/tasks/echo/resume'), 'POST', '/v1/tasks/{name}/resume');
    await documented(await t.call('POST', '/v1/wake', { body: {} }), 'POST', '/v1/wake');
    await documented(await t.call('GET', '/v1/tick'), 'GET', '/v1/tick');
    await documented(await t.call('GET', '/healthz', { token: null }), 'GET', '/healthz');
    await documented(await t.call('GET', '/healthz?deep=1'), 'GET', '/healthz');
    await documented(await t.call('GET', '/healthz?deep=1', { token: null }), 'GET', '/healthz');
    await documented(await t.call('GET', '/v1/stats', { token: 'wrong-token-0123456789' }), 'GET', '/v1/stats');
  });

  test('a job with steps, a child and an event wait; events; a callback', async () => {
    const { job } = await documented(await t.call('POST', '/v1/jobs', { body: { task: 'workflow', payload: { order: 'o-1' } } }), 'POST', '/v1/jobs');
    // Its steps, its child and its resumption may take a few ticks.
    let waiting: any;
    for (let i = 0; i < 10 && waiting?.steps.at(-1)?.kind !== 'event'; i++) {
      await tick();
      waiting = (await documented(await t.call('GET', `/v1/jobs/${job.id}`), 'GET', '/v1/jobs/{id}')).job;
    }
    // A timed wait is QUEUED until its timeout (docs/steps.md), as a sleep is.
    expect(waiting.steps.at(-1)).toMatchObject({ kind: 'event', status: 'waiting' });
    expect(waiting.steps.map((s: any) => s.kind)).toEqual(['step', 'step', 'invoke', 'event']);
    expect(waiting.children).toHaveLength(1);
    const sent = await documented(await t.call('POST', '/v1/events', { body: { name: 'order.paid', key: 'o-1', data: { amount: 12 } } }), 'POST', '/v1/events');
    expect(undocumentedOrOptional(sent, 'SendEventResult')).toEqual({ undocumented: [], notRequired: [] });
    let done: any;
    for (let i = 0; i < 10 && done?.status !== 'DONE'; i++) {
      await tick();
      done = (await documented(await t.call('GET', `/v1/jobs/${job.id}`), 'GET', '/v1/jobs/{id}')).job;
    }
    expect(done.status).toBe('DONE');
    expect(done.steps[1].output).toBeNull();
    for (const step of done.steps) expect(undocumentedOrOptional(step, 'JobStep', ['eventName', 'eventKey', 'eventId'])).toEqual({ undocumented: [], notRequired: [] });
    expect(undocumentedOrOptional(done.children[0], 'JobChild')).toEqual({ undocumented: [], notRequired: [] });
    const { events } = await documented(await t.call('GET', '/v1/events?name=order.paid'), 'GET', '/v1/events');
    expect(undocumentedOrOptional(events[0], 'Event')).toEqual({ undocumented: [], notRequired: [] });
    await documented(await t.call('POST', '/v1/callbacks/not-a-token', { token: null, body: { ok: true } }), 'POST', '/v1/callbacks/{token}');
  });

  test('schedules: list, get, put, delete', async () => {
    await documented(await t.call('PUT', '/v1/schedules/doc-nightly', { body: { cron: '0 3 * * *', task: 'echo', payload: { message: 'n' } } }), 'PUT', '/v1/schedules/{name}');
    await documented(await t.call('PUT', '/v1/schedules/doc-nightly', { body: { every: '1h', task: 'echo', payload: { message: 'n' } } }), 'PUT', '/v1/schedules/{name}');
    const { schedules } = await documented(await t.call('GET', '/v1/schedules'), 'GET', '/v1/schedules');
    expect(schedules.map((s: any) => s.source).sort()).toEqual(expect.arrayContaining(['dynamic', 'static']));
    for (const s of schedules) expect(undocumentedOrOptional(s, 'Schedule')).toEqual({ undocumented: [], notRequired: [] });
    await documented(await t.call('GET', '/v1/schedules/static-report'), 'GET', '/v1/schedules/{name}');
    await documented(await t.call('PUT', '/v1/schedules/static-report', { body: { cron: '0 3 * * *', task: 'echo', payload: { message: 'n' } } }), 'PUT', '/v1/schedules/{name}');
    await documented(await t.call('DELETE', '/v1/schedules/doc-nightly'), 'DELETE', '/v1/schedules/{name}');
    await documented(await t.call('DELETE', '/v1/schedules/doc-nightly'), 'DELETE', '/v1/schedules/{name}');
  });
});

describe('methods', () => {
  test.each([
    ['DELETE', '/v1/jobs', 'GET, HEAD, POST'],
    ['PUT', '/v1/jobs/1', 'GET, HEAD, PATCH'],
    ['GET', '/v1/jobs/1/cancel', 'POST'],
    ['POST', '/v1/schedules', 'GET, HEAD'],
    ['PATCH', '/v1/schedules/nightly', 'DELETE, GET, HEAD, PUT'],
    ['POST', '/healthz', 'GET, HEAD'],
    ['PUT', '/openapi.json', 'GET, HEAD'],
    ['DELETE', '/', 'GET, HEAD'],
    ['GET', '/login/../logout', 'POST'],
  ])('%s %s → 405 with Allow: %s, in the error format, writing nothing', async (method, path, allow) => {
    const before = await t.countJobs();
    const res = await t.call(method, path);
    expect(res.status).toBe(405);
    expect(res.headers.get('allow')).toBe(allow);
    expect(await res.json()).toEqual({ error: { code: 'method_not_allowed', message: expect.stringContaining(allow) } });
    expect(await t.countJobs()).toBe(before);
  });

  test.each([
    ['GET', '/nope'],
    ['GET', '/v1/nope'],
    ['DELETE', '/v1/jobs/1/nope'],
    ['GET', '/v1/jobs/1/cancel/x'],
  ])('%s %s (no such path) stays 404', async (method, path) => {
    const res = await t.call(method, path);
    expect(res.status).toBe(404);
    expect(res.headers.get('allow')).toBeNull();
    expect(await res.json()).toMatchObject({ error: { code: 'not_found' } });
  });

  test('a route a project adds to the app has its methods too', async () => {
    const app = createApp({ skiplock: t.skiplock, apiToken: API_TOKEN });
    app.get('/mine', (c) => c.text('mine'));
    const res = await app.request('/mine', { method: 'DELETE' });
    expect([res.status, res.headers.get('allow')]).toEqual([405, 'GET, HEAD']);
    expect((await app.request('/mine/x', { method: 'DELETE' })).status).toBe(404);
  });

  test('without the token, a wrong method on /v1 is still 401 (nothing about the API is told to strangers)', async () => {
    expect((await t.call('DELETE', '/v1/jobs', { token: null })).status).toBe(401);
  });
});
