/** A job as the enqueue writes it: the row insertJobs (enqueue.ts), the steps' children and the events' `on:` jobs insert. */
export interface NewJobRow {
  task: string;
  payload: unknown;
  priority: number;
  /** An absolute run time; when null, `delay_ms` after the database's now. */
  run_at: string | null;
  delay_ms: number;
  max_attempts: number;
  timeout_ms: number;
  idempotency_key: string | null;
  schedule_name: string | null;
  scheduled_for: string | null;
  /** The W3C traceparent of the enqueuer (src/runtime/observability/tracing.ts); null or absent: none. */
  traceparent?: string | null;
  /** Flow control keys (src/runtime/flow/keys.ts): null for a task without concurrency or rate limits. */
  flow_key?: string | null;
  rate_key?: string | null;
  /** Fair share's and batches' keys (migration 022, src/runtime/flow/keys.ts jobKeys): null without. */
  fair_key?: string | null;
  batch_key?: string | null;
  /** cancelOn (migration 016): `name` or `name key` entries; absent or null: none. */
  cancel_on?: string[] | null;
}
