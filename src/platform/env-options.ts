/**
 * Tick options from environment variables, shared by the platform adapters. Platforms hand
 * variables over as strings (Vercel, Node) or as JSON values (wrangler `[vars]`), so both are read.
 */
import type { TickOptions } from '../runtime/tick.ts';

export interface TickEnv {
  /** How long a tick may run, in ms (see each platform for its default and its limit). */
  TICK_BUDGET_MS?: string | number;
  /** Handlers running at once. Default 10. */
  TICK_CONCURRENCY?: string | number;
  /** Wait between claims while the queue is empty, in ms. */
  TICK_POLL_INTERVAL_MS?: string | number;
}

/** A positive integer from an environment variable, or `fallback` when it is unset or empty. */
export function intFromEnv(value: string | number | undefined, fallback: number, name: string): number {
  if (value === undefined || value === '') return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n <= 0) throw new TypeError(`${name} must be a positive integer, got ${JSON.stringify(value)}`);
  return n;
}

/** The tick options the variables set, over the platform's defaults. */
export function tickOptionsFromEnv(env: TickEnv, defaults: { budgetMs: number; pollIntervalMs: number }): TickOptions {
  return {
    budgetMs: intFromEnv(env.TICK_BUDGET_MS, defaults.budgetMs, 'TICK_BUDGET_MS'),
    pollIntervalMs: intFromEnv(env.TICK_POLL_INTERVAL_MS, defaults.pollIntervalMs, 'TICK_POLL_INTERVAL_MS'),
    concurrency: intFromEnv(env.TICK_CONCURRENCY, 10, 'TICK_CONCURRENCY'),
  };
}
