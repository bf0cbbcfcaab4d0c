/** OpenTelemetry: the enqueue's trace context stored with the job; each attempt in its span; an in-memory exporter. */
import { AsyncLocalStorage } from 'node:async_hooks';
import * as otel from '@opentelemetry/api';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'vitest';
import { z } from 'zod';
import { createSkiplock, defineTask, type Job } from '../../src/index.ts';
import { resolveTracing, type OtelApi } from '../../src/runtime/observability/tracing.ts';
import { statement } from '../../src/store/sql.ts';
import { createTestDb, type TestDb } from '../support/db.ts';

/** What a user's SDK set-up provides in Node: a context manager on AsyncLocalStorage. */
class AsyncLocalStorageContextManager implements otel.ContextManager {
  private readonly storage = new AsyncLocalStorage<otel.Context>();
  active() {
    return this.storage.getStore() ?? otel.ROOT_CONTEXT;
  }
  with<A extends unknown[], F extends (...args: A) => ReturnType<F>>(context: otel.Context, fn: F, thisArg?: ThisParameterType<F>, ...args: A) {
    return this.storage.run(context, () => fn.call(thisArg, ...args));
  }
  bind<T>(_context: otel.Context, target: T): T {
    return target;
  }
  enable() {
    return this;
  }
  disable() {
    this.storage.disable();
    return this;
  }
}

const exporter = new InMemorySpanExporter();
const tracer = () => otel.trace.getTracer('test');
let db: TestDb;
beforeAll(async () => {
  db = await createTestDb();
  otel.context.setGlobalContextManager(new AsyncLocalStorageContextManager());
  otel.trace.setGlobalTracerProvider(new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }));
});
afterAll(async () => {
  otel.trace.disable();
  otel.context.disable();
  await db.drop();
});
beforeEach(async () => {
  exporter.reset();
  await db.emptyJobs();
});

const quiet = () => {};
const traceparentOf = (sc: otel.SpanContext) => `00-${sc.traceId}-${sc.spanId}-0${sc.traceFlags}`;
const runSpans = (task: string) => exporter.getFinishedSpans().filter((s) => s.name === `run ${task}`);
const parentOf = (span: ReadableSpan) => span.parentSpanContext?.spanId;

/** Enqueues inside a span, as a request handler would; returns the job and that span's context. */
async function enqueueInSpan(enqueue: () => Promise<Job>): Promise<{ job: Job; caller: otel.SpanContext }> {
  return tracer().startActiveSpan('caller', async (span) => {
    const job = await enqueue();
    span.end();
    return { job, caller: span.spanContext() };
  });
}

describe('OpenTelemetry', () => {
  test("the first attempt is a child of the enqueuer's span; the handler's spans and jobs descend from the attempt", async () => {
    const task = defineTask({ name: 'traced', payload: z.object({}), handler: async (_p, ctx) => {
      tracer().startActiveSpan('inside the handler', (span) => span.end());
      return (await ctx.enqueue({ task: 'leaf', payload: {} })).id;
    } });
    const leaf = defineTask({ name: 'leaf', payload: z.object({}), handler: () => 'leaf' });
    const skiplock = createSkiplock({ sql: db.sql, tasks: [task, leaf], otel, log: quiet });
    const { job, caller } = await enqueueInSpan(() => skiplock.enqueue({ task: 'traced', payload: {} }));
    expect(job.traceparent).toBe(traceparentOf(caller));

    await skiplock.tick({ untilIdle: true });
    const [run] = runSpans('traced');
    expect(run).toBeDefined();
    expect(run!.spanContext().traceId).toBe(caller.traceId);
    expect(parentOf(run!)).toBe(caller.spanId);
    expect(run!.kind).toBe(otel.SpanKind.CONSUMER);
    expect(run!.attributes).toMatchObject({ 'skiplock.job.id': job.id, 'skiplock.task': 'traced', 'skiplock.attempt': 1, 'skiplock.outcome': 'done' });
    expect(run!.status.code).toBe(otel.SpanStatusCode.OK);

    const inside = exporter.getFinishedSpans().find((s) => s.name === 'inside the handler')!;
    expect(parentOf(inside)).toBe(run!.spanContext().spanId);
    const done = (await skiplock.getJob(job.id))!;
    expect(done.history[0]!.traceparent).toBe(traceparentOf(run!.spanContext()));
    // The job the handler enqueued carries the attempt's context, and its own run descends from it.
    const child = (await skiplock.getJob(done.result as string))!;
    expect(child.traceparent).toBe(traceparentOf(run!.spanContext()));
    expect(parentOf(runSpans('leaf')[0]!)).toBe(run!.spanContext().spanId);
  });

  test('a retry starts its own trace, linked to the enqueuer: no trace stretched over the backoff', async () => {
    const task = defineTask({ name: 'retried', payload: z.object({}), backoff: () => 0, handler: (_p, ctx) => {
      if (ctx.attempt === 1) throw new Error('first attempt fails');
      return 'ok';
    } });
    const skiplock = createSkiplock({ sql: db.sql, tasks: [task], otel, log: quiet });
    const { job, caller } = await enqueueInSpan(() => skiplock.enqueue({ task: 'retried', payload: {} }));
    await skiplock.tick({ untilIdle: true });

    const [first, second] = runSpans('retried').sort((a, b) => Number(a.attributes['skiplock.attempt']) - Number(b.attributes['skiplock.attempt']));
    expect(first!.attributes).toMatchObject({ 'skiplock.attempt': 1, 'skiplock.outcome': 'retry' });
    expect(first!.status).toEqual({ code: otel.SpanStatusCode.ERROR, message: 'Error: first attempt fails' });
    expect(parentOf(first!)).toBe(caller.spanId);
    expect(second!.attributes).toMatchObject({ 'skiplock.attempt': 2, 'skiplock.outcome': 'done' });
    expect(parentOf(second!)).toBeUndefined();
    expect(second!.spanContext().traceId).not.toBe(caller.traceId);
    expect(second!.links.map((l) => l.context.spanId)).toEqual([caller.spanId]);
    // Each attempt's trace is findable from the job.
    const history = (await skiplock.getJob(job.id))!.history;
    expect(history.map((h) => h.traceparent)).toEqual([traceparentOf(first!.spanContext()), traceparentOf(second!.spanContext())]);
  });

  test("a job without a trace context gets a root span, not the context of whatever runs the tick", async () => {
    const task = defineTask({ name: 'untraced', payload: z.object({}), handler: () => 'ok' });
    const skiplock = createSkiplock({ sql: db.sql, tasks: [task], otel, log: quiet });
    const job = await skiplock.enqueue({ task: 'untraced', payload: {} });
    expect(job.traceparent).toBeNull();
    // The tick runs inside a request's span (startWork after an HTTP enqueue does).
    await tracer().startActiveSpan('some request', async (span) => {
      await skiplock.tick({ untilIdle: true });
      span.end();
    });
    const [run] = runSpans('untraced');
    expect(parentOf(run!)).toBeUndefined();
    expect(run!.links).toEqual([]);
  });

  test('an explicit traceparent wins over the active context; a malformed one is refused and writes nothing', async () => {
    const task = defineTask({ name: 'explicit', payload: z.object({}), handler: () => 'ok' });
    const skiplock = createSkiplock({ sql: db.sql, tasks: [task], otel, log: quiet });
    const given = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
    const { job } = await enqueueInSpan(() => skiplock.enqueue({ task: 'explicit', payload: {}, traceparent: given }));
    expect(job.traceparent).toBe(given);
    for (const bad of ['00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331', 'ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01',
      '00-00000000000000000000000000000000-b7ad6b7169203331-01', '00-0AF7651916CD43DD8448EB211C80319C-B7AD6B7169203331-01'])
      await expect(skiplock.enqueue({ task: 'explicit', payload: {}, traceparent: bad })).rejects.toMatchObject({ code: 'invalid_request' });
    const [row] = await db.sql.query(statement(`SELECT count(*)::int AS n FROM skiplock.job`));
    expect(row!.n).toBe(1);
  });

  test('without the option, @opentelemetry/api is imported lazily when installed; otel: false turns it off', async () => {
    const task = defineTask({ name: 'lazy', payload: z.object({}), handler: () => 'ok' });
    const lazy = createSkiplock({ sql: db.sql, tasks: [task], log: quiet });
    const { job, caller } = await enqueueInSpan(() => lazy.enqueue({ task: 'lazy', payload: {} }));
    expect(job.traceparent).toBe(traceparentOf(caller));
    await lazy.tick({ untilIdle: true });
    expect(runSpans('lazy')).toHaveLength(1);

    exporter.reset();
    const off = createSkiplock({ sql: db.sql, tasks: [task], otel: false, log: quiet });
    const { job: untraced } = await enqueueInSpan(() => off.enqueue({ task: 'lazy', payload: {} }));
    expect(untraced.traceparent).toBeNull();
    await off.tick({ untilIdle: true });
    expect(runSpans('lazy')).toHaveLength(0);
  });

  test('not installed: the lazy import fails once, quietly, and tracing stays off', async () => {
    let imports = 0;
    const tracing = resolveTracing(undefined, async () => {
      imports += 1;
      throw new Error("Cannot find package '@opentelemetry/api'");
    });
    expect(await tracing()).toBeNull();
    expect(await tracing()).toBeNull();
    expect(imports).toBe(1);
    // Something that is not the API (a bundler's stub) is not used either.
    expect(await resolveTracing(undefined, async () => ({}))()).toBeNull();
  });

  test('the API module fits the option type as imported', () => {
    const api: OtelApi = otel;
    expect(typeof api.trace.getTracer).toBe('function');
  });
});

test('with the API but no SDK registered: the traceparent is still stored, and no attempt claims a trace of its own', async () => {
  otel.trace.disable();
  try {
    const task = defineTask({ name: 'no-sdk', payload: z.object({}), handler: () => 'ok' });
    const skiplock = createSkiplock({ sql: db.sql, tasks: [task], otel, log: quiet });
    const given = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
    const job = await skiplock.enqueue({ task: 'no-sdk', payload: {}, traceparent: given });
    await skiplock.tick({ untilIdle: true });
    const done = (await skiplock.getJob(job.id))!;
    expect(done).toMatchObject({ status: 'DONE', traceparent: given });
    expect(done.history[0]!.traceparent).toBeNull();
  } finally {
    otel.trace.setGlobalTracerProvider(new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }));
  }
});
