/** Renders metrics in the Prometheus text exposition format (version 0.0.4). Pure. */
import type { JobStats } from '../runtime/operations/index.ts';
import type { FlowStatus } from '../runtime/flow/index.ts';
import { TICK_DURATION_BUCKETS, type TickTotals } from '../runtime/tick/index.ts';

export const PROMETHEUS_CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';

type Labels = Record<string, string>;

function escapeLabel(value: string): string {
  return value.replaceAll('\\', '\\\\').replaceAll('"', '\\"').replaceAll('\n', '\\n');
}

function sample(name: string, value: number, labels: Labels = {}): string {
  const pairs = Object.entries(labels).map(([k, v]) => `${k}="${escapeLabel(v)}"`);
  return `${name}${pairs.length > 0 ? `{${pairs.join(',')}}` : ''} ${Number.isFinite(value) ? value : 0}`;
}

function family(name: string, type: 'gauge' | 'counter' | 'histogram', help: string, samples: string[]): string[] {
  return [`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`, ...samples];
}

/** Gauges come from the database (the same for every isolate); counters from this isolate's ticks. */
export interface FlowControlGauge {
  task: string;
  paused: boolean;
  /** QUEUED jobs waiting on a debounce. */
  debounced: number;
}

/** Streams in this process: the chunks its runs stored, and the SSE readers open now. */
export interface StreamGauges {
  chunksWritten: number;
  readers: number;
}

export function renderMetrics(stats: JobStats, ticks: TickTotals, flow: readonly FlowControlGauge[] = [], limits?: FlowStatus, streams?: StreamGauges): string {
  const byTask = Object.entries(stats.byTask).flatMap(([task, counts]) =>
    Object.entries(counts).map(([status, n]) => sample('skiplock_jobs', n, { status, task })),
  );
  const counter = (name: string, help: string, value: number) => family(name, 'counter', help, [sample(name, value)]);
  const observed = ticks.ticks + ticks.failedTicks;
  const lines = [
    ...family('skiplock_jobs', 'gauge', 'Jobs in the table, by status and task (DONE estimated beyond 1,000 of them).', byTask),
    ...family(
      'skiplock_jobs_by_status',
      'gauge',
      'Jobs in the table, by status.',
      Object.entries(stats.counts).map(([status, n]) => sample('skiplock_jobs_by_status', n, { status })),
    ),
    ...family('skiplock_jobs_unrunnable', 'gauge', 'QUEUED or WAITING jobs of a task this deployment does not register: nothing here can run them.',
      (stats.unrunnable ?? []).map((u) => sample('skiplock_jobs_unrunnable', u.queued + u.waiting, { task: u.task }))),
    ...family('skiplock_queue_depth', 'gauge', 'The queue, exactly: QUEUED jobs due now (due) and not yet (scheduled), RUNNING, WAITING.',
      Object.entries(stats.depth ?? {}).map(([state, n]) => sample('skiplock_queue_depth', n, { state }))),
    ...family('skiplock_oldest_queued_age_seconds', 'gauge', 'How long the longest-waiting due QUEUED job has waited past its run time.', [
      sample('skiplock_oldest_queued_age_seconds', stats.oldestQueuedAgeMs / 1000),
    ]),
    ...family('skiplock_task_paused', 'gauge', 'Paused tasks (1): no tick claims their jobs.', flow.filter((f) => f.paused).map((f) => sample('skiplock_task_paused', 1, { task: f.task }))),
    ...family('skiplock_jobs_debounced', 'gauge', 'QUEUED jobs waiting on a debounce, by task.', flow.filter((f) => f.debounced > 0).map((f) => sample('skiplock_jobs_debounced', f.debounced, { task: f.task }))),
    ...(limits ? flowFamilies(limits) : []),
    ...counter('skiplock_ticks_total', 'Ticks run by this process or isolate.', ticks.ticks),
    ...counter('skiplock_tick_failures_total', 'Ticks that threw.', ticks.failedTicks),
    ...counter('skiplock_claims_total', 'Jobs claimed.', ticks.claimed),
    ...counter('skiplock_completions_total', 'Jobs finished successfully (DONE).', ticks.done),
    ...counter('skiplock_retries_total', 'Failed attempts put back in the queue (including jobs released at a deadline).', ticks.retried),
    ...counter('skiplock_suspended_total', 'Durable steps: jobs that went to sleep, to WAITING for their children, or yielded between steps.', ticks.suspended),
    ...counter('skiplock_dead_total', 'Jobs moved to DEAD by a run.', ticks.dead),
    ...counter('skiplock_cancelled_total', 'Running jobs stopped by a cancel.', ticks.cancelled),
    ...counter('skiplock_reaped_total', 'Expired leases returned to the queue or to DEAD.', ticks.reaped),
    ...counter('skiplock_cron_firings_total', 'Cron firings inserted.', ticks.fired),
    ...counter('skiplock_stale_writes_total', 'Result writes that changed nothing because another worker owned the job.', ticks.staleWrites),
    ...(streams
      ? [
          ...counter('skiplock_stream_chunks_written_total', 'Stream chunks (ctx.stream) stored by the runs of this process or isolate.', streams.chunksWritten),
          ...family('skiplock_stream_readers', 'gauge', 'Server-Sent Events readers of job streams open in this process or isolate.', [sample('skiplock_stream_readers', streams.readers)]),
        ]
      : []),
    ...family('skiplock_tick_duration_seconds', 'histogram', 'How long ticks took.', [
      ...TICK_DURATION_BUCKETS.map((le, i) => sample('skiplock_tick_duration_seconds_bucket', ticks.durationBuckets[i] ?? 0, { le: String(le) })),
      sample('skiplock_tick_duration_seconds_bucket', observed, { le: '+Inf' }),
      sample('skiplock_tick_duration_seconds_sum', ticks.durationSecondsSum),
      sample('skiplock_tick_duration_seconds_count', observed),
    ]),
  ];
  return `${lines.join('\n')}\n`;
}

/** Flow control (tasks with concurrency or rateLimit): counts by task, never a series per key. */
function flowFamilies(flow: FlowStatus): string[] {
  const tasks = Object.entries(flow.byTask);
  return [
    ...family(
      'skiplock_flow_keys_at_limit',
      'gauge',
      'Keys at their limit, by task and limit (concurrency: per key; global: the task over all keys; rate: per key, in the current window).',
      tasks.flatMap(([task, t]) => Object.entries(t.keysAtLimit).map(([limit, n]) => sample('skiplock_flow_keys_at_limit', n, { limit, task }))),
    ),
    ...family('skiplock_flow_jobs_waiting', 'gauge', 'Due QUEUED jobs held back by a concurrency or rate limit, by task.', tasks.map(([task, t]) => sample('skiplock_flow_jobs_waiting', t.waiting, { task }))),
  ];
}
