/**
 * Enqueueing as a Skiplock offers it: one job, a batch, a statement for the caller's own
 * transaction, and enqueueing then waiting for the result. Each enqueue that creates (or pushes
 * back) a job tells the hook when it is due. Validation and the statements: enqueue.ts; the wait:
 * wait-for-job.ts.
 */
import type { Job, TickResult } from '../../core/types.ts';
import type { Statement } from '../../store/sql.ts';
import type { SkiplockContext } from '../context.ts';
import { readJob } from '../operations/read-jobs.ts';
import type { TickOptions } from '../tick/options.ts';
import { enqueueJobs, prepareEnqueue, type EnqueueInput, type EnqueueResult } from './enqueue.ts';
import { checkWaitMs, waitForJob, type WaitResult } from './wait-for-job.ts';

export interface EnqueueAndWaitOptions {
  /** How long to wait for the job to finish, in ms (0 to 24 h). Required. */
  timeoutMs: number;
  /**
   * Also start a tick at once (`tick({ untilIdle: true, ...options })`), for when nothing else runs
   * ticks (a script, a test). Its promise is returned as `tick`: on a serverless platform, hand it
   * to waitUntil. Default false: the deployment's ticks run the job.
   */
  tick?: boolean | TickOptions;
}

export interface EnqueueAndWaitResult extends WaitResult {
  /** False when the idempotency key matched an existing job: that job is waited for. */
  created: boolean;
  /** The tick started by the `tick` option. */
  tick?: Promise<TickResult>;
}

export interface EnqueueOperations {
  enqueue(input: EnqueueInput): Promise<Job>;
  enqueueWithResult(input: EnqueueInput): Promise<EnqueueResult>;
  enqueueBatch(inputs: readonly EnqueueInput[]): Promise<EnqueueResult[]>;
  enqueueStatement(input: EnqueueInput): Statement;
  enqueueAndWait(input: EnqueueInput, options: EnqueueAndWaitOptions): Promise<EnqueueAndWaitResult>;
  waitForJob(id: string, options: { timeoutMs: number }): Promise<WaitResult | undefined>;
}

/** `tick`: the tick enqueueAndWait's `tick` option starts (skiplock.tick). */
export function createEnqueueOperations(ctx: SkiplockContext, tick: (options: TickOptions) => Promise<TickResult>): EnqueueOperations {
  const { sql, registry, now, log } = ctx;
  const afterEnqueue = async (inputs: readonly EnqueueInput[], results: EnqueueResult[]) => {
    const due = inputs.flatMap((input, i) => (results[i]?.created || input.debounce ? [dueAtOf(input)] : []));
    if (due.length > 0) await ctx.dueWork(Math.min(...due));
    return results;
  };
  const enqueueWithResult = async (input: EnqueueInput) =>
    (await afterEnqueue([input], await enqueueJobs(sql, registry, [input], now(), { traceparent: input.traceparent ?? (await ctx.traceparent()) })))[0]!;
  return {
    enqueue: async (input) => (await enqueueWithResult(input)).job,
    enqueueWithResult,
    enqueueBatch: async (inputs) =>
      afterEnqueue(inputs, await enqueueJobs(sql, registry, inputs, now(), { batch: true, traceparent: await ctx.traceparent() })),
    enqueueStatement: (input) => {
      // { text, values } for the caller's own transaction, without the hint for skiplock's drivers.
      const { text, values } = prepareEnqueue(registry, [input], now())!.statement;
      return { text, values };
    },
    async enqueueAndWait(input, options) {
      const timeoutMs = checkWaitMs(options?.timeoutMs);
      const { job, created } = await enqueueWithResult(input);
      const started = options.tick ? tick({ untilIdle: true, ...(options.tick === true ? {} : options.tick) }) : undefined;
      started?.catch((error: unknown) => log('error', 'the tick started by enqueueAndWait failed', { error: String(error) }));
      const waited = await waitForJob(job, timeoutMs, { read: () => readJob(sql, job.id) });
      return { ...waited, created, ...(started && { tick: started }) };
    },
    async waitForJob(id, options) {
      const timeoutMs = checkWaitMs(options?.timeoutMs);
      const job = await readJob(sql, id);
      return job && waitForJob(job, timeoutMs, { read: () => readJob(sql, id) });
    },
  };
}

/**
 * When an enqueue's job becomes due, on the platform's clock: the caller's runAt, or now + its
 * delay (a debounce: at most its maxDelayMs, so never later than the job).
 */
export function dueAtOf(input: { runAt?: Date | string | undefined; delayMs?: number | undefined; debounce?: { delayMs: number; maxDelayMs?: number | undefined } | undefined }): number {
  if (input.runAt !== undefined) return new Date(input.runAt).getTime();
  const delay = input.debounce ? Math.min(input.debounce.delayMs, input.debounce.maxDelayMs ?? Infinity) : (input.delayMs ?? 0);
  return Date.now() + delay;
}
