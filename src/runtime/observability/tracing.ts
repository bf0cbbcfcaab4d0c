/**
 * OpenTelemetry, without depending on it. `@opentelemetry/api` is an optional peer: skiplock uses
 * the module the user passes (`createSkiplock({ otel })`, what a Worker bundle needs, since a
 * bundler cannot see a lazy import), or else imports it lazily the first time it is needed, and
 * without it changes nothing and loads nothing.
 *
 *   enqueue ........ stores the caller's W3C traceparent with the job
 *   each attempt ... runs inside a CONSUMER span: the first attempt is a child of the stored
 *                    context; a later one (a retry, minutes or days later) starts its own trace
 *                    with a link to it, so that a trace does not stretch over hours of backoff.
 *                    Every attempt's traceparent is kept in its history entry.
 *
 * Only the API is used (the types below are the part of it skiplock calls), so any SDK the user
 * registers receives the spans, and the handler's own spans nest under the attempt's wherever the
 * user has a context manager (AsyncLocalStorage in Node and in workerd with nodejs_compat).
 */
import type { Job } from '../../core/types.ts';
import type { RunningJob, Settled } from '../tick/run-job.ts';
import type { RunningBatch } from '../tick/run-batch.ts';
import { isTraceparent, TRACEPARENT } from '../../core/traceparent.ts';
export { isTraceparent } from '../../core/traceparent.ts';

/** The part of `@opentelemetry/api` skiplock uses; `import * as otel from '@opentelemetry/api'` fits it. */
export interface OtelApi {
  trace: {
    getTracer(name: string, version?: string): OtelTracer;
    getSpanContext(context: unknown): OtelSpanContext | undefined;
    setSpanContext(context: any, spanContext: OtelSpanContext): any;
    setSpan(context: any, span: any): any;
    isSpanContextValid(spanContext: OtelSpanContext): boolean;
  };
  context: { active(): any; with<R>(context: any, fn: () => R): R };
  propagation: { inject(context: any, carrier: Record<string, string>): void };
  ROOT_CONTEXT: unknown;
}

export interface OtelSpanContext {
  traceId: string;
  spanId: string;
  traceFlags: number;
  isRemote?: boolean;
}

interface OtelTracer {
  startSpan(
    name: string,
    options: { kind: number; attributes: Record<string, string | number>; links: { context: OtelSpanContext }[] },
    context: unknown,
  ): OtelSpan;
}

interface OtelSpan {
  spanContext(): OtelSpanContext;
  isRecording(): boolean;
  setAttribute(key: string, value: string | number): unknown;
  setStatus(status: { code: number; message?: string }): unknown;
  end(): void;
}

// The API's enum values (stable since 1.0), so that nothing but the module object is needed.
const SPAN_KIND_CONSUMER = 4;
const STATUS_ERROR = 2;
const STATUS_OK = 1;

/** `createSkiplock({ otel })`: the API module; undefined: import it lazily if installed; false: off. */
export type OtelOption = OtelApi | false | undefined;

export interface Tracing {
  /** The W3C traceparent of the active context, if there is a valid one. */
  currentTraceparent(): string | undefined;
  /** Starts `run` inside the attempt's span, ended with the attempt's outcome when it settles. */
  runAttempt(job: Job, run: () => RunningJob): TracedRun;
  /** Starts a batch call (src/runtime/tick/run-batch.ts) inside one span, with its item count; ended when every item settles. */
  runBatch(task: string, jobs: readonly Job[], run: () => RunningBatch): RunningBatch & { traceparent: string | null };
}

export type TracedRun = RunningJob & { traceparent: string | null };


function parseTraceparent(value: string | null): OtelSpanContext | undefined {
  if (value === null || !isTraceparent(value)) return undefined;
  const [, , traceId, spanId, flags] = TRACEPARENT.exec(value)!;
  return { traceId: traceId!, spanId: spanId!, traceFlags: parseInt(flags!, 16), isRemote: true };
}

function formatTraceparent(sc: OtelSpanContext): string {
  return `00-${sc.traceId}-${sc.spanId}-${(sc.traceFlags & 0xff).toString(16).padStart(2, '0')}`;
}

export function createTracing(api: OtelApi): Tracing {
  const tracer = api.trace.getTracer('skiplock');
  return {
    currentTraceparent() {
      const active = api.context.active();
      // The user's propagator first (it may be configured); the span context itself otherwise.
      const carrier: Record<string, string> = {};
      api.propagation.inject(active, carrier);
      if (carrier.traceparent && isTraceparent(carrier.traceparent)) return carrier.traceparent;
      const sc = api.trace.getSpanContext(active);
      return sc && api.trace.isSpanContextValid(sc) ? formatTraceparent(sc) : undefined;
    },
    runAttempt(job, run) {
      const origin = parseTraceparent(job.traceparent);
      const firstAttempt = job.attempts <= 1;
      // Never the active context: a tick started by an HTTP request would adopt every job it ran.
      const parent = origin && firstAttempt ? api.trace.setSpanContext(api.ROOT_CONTEXT, origin) : api.ROOT_CONTEXT;
      const span = tracer.startSpan(
        `run ${job.task}`,
        {
          kind: SPAN_KIND_CONSUMER,
          attributes: {
            'messaging.system': 'skiplock',
            'messaging.operation.type': 'process',
            'skiplock.job.id': job.id,
            'skiplock.task': job.task,
            'skiplock.attempt': job.attempts,
          },
          links: origin && !firstAttempt ? [{ context: origin }] : [],
        },
        parent,
      );
      const running = api.context.with(api.trace.setSpan(parent, span), run);
      void running.settled.then((settled) => endAttemptSpan(span, settled));
      // Without an SDK the API hands back the parent's context: not this attempt's, so not recorded.
      const sc = span.spanContext();
      return Object.assign(running, { traceparent: span.isRecording() && api.trace.isSpanContextValid(sc) ? formatTraceparent(sc) : null });
    },
    runBatch(task, jobs, run) {
      // A call of many jobs has many origins: a root span, linked to each item's (up to 128).
      const links = jobs.flatMap((j) => parseTraceparent(j.traceparent) ?? []).slice(0, 128).map((context) => ({ context }));
      const span = tracer.startSpan(
        `run ${task} (batch)`,
        {
          kind: SPAN_KIND_CONSUMER,
          attributes: { 'messaging.system': 'skiplock', 'messaging.operation.type': 'process', 'messaging.batch.message_count': jobs.length, 'skiplock.task': task, 'skiplock.batch.size': jobs.length },
          links,
        },
        api.ROOT_CONTEXT,
      );
      const running = api.context.with(api.trace.setSpan(api.ROOT_CONTEXT, span), run);
      void Promise.all(running.items.map((i) => i.settled)).then((settled) => endBatchSpan(span, settled));
      const sc = span.spanContext();
      return Object.assign(running, { traceparent: span.isRecording() && api.trace.isSpanContextValid(sc) ? formatTraceparent(sc) : null });
    },
  };
}

/** The history's name for how a run settled. */
export function settledOutcome(settled: Settled): string {
  switch (settled.kind) {
    case 'release':
      return 'released';
    case 'suspend':
      return settled.runAt === null ? 'released' : 'sleeping'; // a yield between steps, or ctx.sleep
    case 'wait':
      return 'waiting';
    case 'lost':
      return 'lease-lost';
    default:
      return settled.kind;
  }
}

function endAttemptSpan(span: OtelSpan, settled: Settled) {
  const outcome = settledOutcome(settled);
  span.setAttribute('skiplock.outcome', outcome);
  if (settled.kind === 'done') span.setStatus({ code: STATUS_OK });
  else if (settled.kind === 'retry' || settled.kind === 'dead') span.setStatus({ code: STATUS_ERROR, message: settled.error });
  else if (settled.kind === 'lost') span.setStatus({ code: STATUS_ERROR, message: 'the lease was lost to another worker' });
  span.end();
}

/** A batch call's span: how many items ended each way; an error status when any did not end DONE. */
function endBatchSpan(span: OtelSpan, settled: readonly Settled[]) {
  const outcomes = new Map<string, number>();
  for (const s of settled) outcomes.set(settledOutcome(s), (outcomes.get(settledOutcome(s)) ?? 0) + 1);
  for (const [outcome, n] of outcomes) span.setAttribute(`skiplock.batch.${outcome}`, n);
  const failed = settled.filter((s) => s.kind !== 'done').length;
  span.setStatus(failed === 0 ? { code: STATUS_OK } : { code: STATUS_ERROR, message: `${failed} of ${settled.length} items did not end DONE` });
  span.end();
}

/**
 * Resolves the `otel` option once: the given module, or `@opentelemetry/api` imported lazily.
 * The specifier is not a literal, so bundlers leave it alone: a Worker without the package still
 * builds, and one that wants tracing passes the module instead.
 */
export function resolveTracing(option: OtelOption, load: () => Promise<unknown> = importOtelApi): () => Promise<Tracing | null> {
  if (option === false) return async () => null;
  if (option !== undefined) {
    const tracing = createTracing(option);
    return async () => tracing;
  }
  let pending: Promise<Tracing | null> | undefined;
  return () =>
    (pending ??= load().then(
      (api) => (isOtelApi(api) ? createTracing(api) : null),
      () => null,
    ));
}

const OTEL_API_MODULE = '@opentelemetry/api';

function importOtelApi(): Promise<unknown> {
  return import(/* @vite-ignore */ /* webpackIgnore: true */ OTEL_API_MODULE);
}

function isOtelApi(value: unknown): value is OtelApi {
  const api = value as Partial<OtelApi> | null;
  return typeof api?.trace?.getTracer === 'function' && typeof api.context?.with === 'function' && typeof api.propagation?.inject === 'function';
}
