/** The options of one enqueue as a schema (the HTTP API accepts exactly this shape): it depends on nothing of the runtime but event names. */
import * as z from 'zod';
import { isTraceparent } from '../../core/traceparent.ts';
import { cancelOnSchema, storableString } from '../events/names.ts';

export const MAX_DELAY_MS = 366 * 24 * 3600 * 1000;

// Instants are sent to PostgreSQL as ISO strings: those need a four-digit year in UTC (no year 0,
// and past 9999 toISOString() writes +010000-…, which PostgreSQL cannot read).
const FIRST_STORABLE_MS = Date.parse('0001-01-01T00:00:00Z');
const LAST_STORABLE_MS = Date.parse('9999-12-31T23:59:59.999Z');
export const storableInstant = z.union([z.date(), z.iso.datetime({ offset: true })]).refine(
  (at) => {
    const ms = new Date(at).getTime();
    return ms >= FIRST_STORABLE_MS && ms <= LAST_STORABLE_MS;
  },
  { message: 'must be between the years 1 and 9999 (UTC)' },
);

/** The options of one enqueue; the HTTP API accepts exactly this shape as JSON. */
export const enqueueInputSchema = z.strictObject({
  task: z.string().min(1).max(200),
  /** Checked against the task's own schema. Omitted means `{}`. */
  payload: z.unknown().optional(),
  /** When the job becomes due (ISO-8601 with offset, or a Date). Default: now. */
  runAt: storableInstant.optional(),
  /** Due this many ms after now (instead of runAt). */
  delayMs: z.number().int().min(0).max(MAX_DELAY_MS).optional(),
  /** Higher runs first. Default: the task's priority. */
  priority: z.number().int().min(-32768).max(32767).optional(),
  /** Default: the task's maxAttempts. */
  maxAttempts: z.number().int().min(1).max(1000).optional(),
  /** Default: the task's timeoutMs. */
  timeoutMs: z.number().int().min(1).max(24 * 3600 * 1000).optional(),
  /** Enqueueing the same key again returns the original job and writes nothing. */
  idempotencyKey: storableString.min(1).max(255).optional(),
  /**
  /**
   * The W3C traceparent each attempt's span descends from. Default: the active OpenTelemetry
   * context's, when @opentelemetry/api is there (src/runtime/observability/tracing.ts); none otherwise.
   */
  traceparent: z.string().max(55).refine(isTraceparent, { message: 'must be a W3C traceparent (00-<32 hex>-<16 hex>-<2 hex>)' }).optional(),
  /**
   * While a job of this task with this key is QUEUED (not yet claimed), enqueueing again updates
   * it instead of adding one: due `delayMs` from now, but at most `maxDelayMs` after the first
   * enqueue; payload of the `last` enqueue (default) or kept from the `first`. Not with runAt,
   * delayMs or idempotencyKey.
   */
  debounce: z.strictObject({
    key: storableString.min(1).max(255),
    delayMs: z.number().int().min(0).max(MAX_DELAY_MS),
    maxDelayMs: z.number().int().min(0).max(MAX_DELAY_MS).optional(),
    keep: z.enum(['first', 'last']).optional(),
  }).optional(),
  /** Events that cancel this job (beside its task's cancelOn): `[{ event, key? }]`, up to 20. */
  cancelOn: cancelOnSchema.optional(),
  /**
   * The key this job takes turns under (docs/flow-control.md, "Fair share"): within a priority
   * level, due jobs of different keys are claimed in turn. Overrides the task's `fairness.key`.
   */
  fairnessKey: storableString.min(1).max(255).optional(),
}).refine((input) => input.runAt === undefined || input.delayMs === undefined, {
  message: 'give runAt or delayMs, not both',
  path: ['delayMs'],
}).refine((input) => input.debounce === undefined || (input.runAt === undefined && input.delayMs === undefined && input.idempotencyKey === undefined), {
  message: 'debounce sets the run time itself and cannot be combined with runAt, delayMs or idempotencyKey',
  path: ['debounce'],
});

export type EnqueueInput = z.input<typeof enqueueInputSchema>;
