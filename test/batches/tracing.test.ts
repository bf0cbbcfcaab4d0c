/**
 * A batch call's OpenTelemetry span (issue 35 item 2; src/runtime/observability/tracing.ts
 * runBatch): one span per call with its item count and outcomes, linked to each item's enqueuer;
 * each item's history entry keeps the call's traceparent.
 */
import * as otel from '@opentelemetry/api';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { z } from 'zod';
import { createSkiplock, defineTask } from '../../src/index.ts';
import { createTestDb, type TestDb } from '../support/db.ts';

const exporter = new InMemorySpanExporter();
let db: TestDb;
beforeAll(async () => {
  db = await createTestDb();
  otel.trace.setGlobalTracerProvider(new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }));
});
afterAll(async () => {
  otel.trace.disable();
  await db.drop();
});

test('one span per call, with the item count and how the items ended; each item keeps its traceparent', async () => {
  let victim = '';
  const task = defineTask({
    name: 'mail',
    payload: z.object({ n: z.number() }),
    batch: { maxSize: 10, maxWaitMs: 0 },
    handler: async (items, ctx) => {
      ctx.fail(victim, new Error('bounced'));
      return items.filter((i) => i.id !== victim).map((i) => ({ id: i.id, result: i.payload.n }));
    },
  });
  const s = createSkiplock({ sql: db.sql, tasks: [task], otel, log: () => {}, retention: false });
  const jobs = (await s.enqueueBatch([1, 2, 3].map((n) => ({ task: 'mail' as const, payload: { n } })))).map((r) => r.job);
  victim = jobs[2]!.id;
  await s.tick({ untilIdle: true });
  const spans = exporter.getFinishedSpans().filter((span) => span.name.startsWith('run mail'));
  expect(spans.map((span) => span.name)).toEqual(['run mail (batch)']);
  expect(spans[0]!.attributes).toMatchObject({ 'skiplock.batch.size': 3, 'messaging.batch.message_count': 3, 'skiplock.batch.done': 2, 'skiplock.batch.retry': 1 });
  const sc = spans[0]!.spanContext();
  for (const job of jobs) expect((await s.getJob(job.id))!.history[0]!.traceparent).toBe(`00-${sc.traceId}-${sc.spanId}-0${sc.traceFlags}`);
});
