/**
 * Tick options from environment variables, shared by the platform adapters. Platforms hand
 * variables over as strings (Vercel, Node) or as JSON values (wrangler `[vars]`), so both are read.
 */
import { secretProblem } from '../http/secrets.ts';
import type { CallbackOptions } from '../runtime/events/index.ts';
import type { StreamTokenOptions } from '../runtime/streams/index.ts';
import type { TickOptions } from '../runtime/tick/index.ts';
import { DEFAULT_IDLE_CHECK_MS } from '../runtime/wake/index.ts';
import { databaseUrlProblem, describeConnectionError } from '../store/drivers/database-url.ts';

/** A variable set wrongly: entry points print its message alone, as one line, and exit non-zero. */
export class ConfigError extends TypeError {
  constructor(message: string) {
    super(message);
    this.name = 'ConfigError';
  }
}

export interface TickEnv {
  /** How long a tick may run, in ms (see each platform for its default and its limit). */
  TICK_BUDGET_MS?: string | number;
  /** Handlers running at once. Default 10. */
  TICK_CONCURRENCY?: string | number;
  /** Wait between claims while the queue is empty, in ms. */
  TICK_POLL_INTERVAL_MS?: string | number;
  /** The longest an idle deployment goes without a database check, in ms (0: never). Default 3 600 000. */
  IDLE_CHECK_MS?: string | number;
}

/** A positive integer from an environment variable, or `fallback` when it is unset or empty. */
export function intFromEnv(value: string | number | undefined, fallback: number, name: string): number {
  if (value === undefined || value === '') return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n <= 0) throw new ConfigError(`${name} must be a positive integer, got ${JSON.stringify(value)}`);
  return n;
}

/** IDLE_CHECK_MS: an integer ≥ 0 (0: never), or the default (one hour) when unset or empty. */
export function idleCheckMsFromEnv(value: string | number | undefined, fallback = DEFAULT_IDLE_CHECK_MS): number {
  if (value === undefined || value === '') return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0) throw new ConfigError(`IDLE_CHECK_MS must be an integer ≥ 0 (0: never check), got ${JSON.stringify(value)}`);
  return n;
}

/** A TCP port (1…65535) from an environment variable, or `fallback` when it is unset or empty. */
export function portFromEnv(value: string | undefined, fallback: number, name = 'PORT'): number {
  if (value === undefined || value === '') return fallback;
  const n = /^\d{1,5}$/.test(value.trim()) ? Number(value) : NaN;
  if (!(n >= 1 && n <= 65535)) throw new ConfigError(`${name} must be an integer from 1 to 65535, got ${JSON.stringify(value)}`);
  return n;
}

/** A required variable, present and non-empty. */
export function requiredEnv(value: string | undefined, name: string): string {
  if (!value) throw new ConfigError(`${name} is not set`);
  return value;
}

/** A secret (API_TOKEN, CRON_SECRET, METRICS_TOKEN): refused when required and unset, or under 16 characters. */
export function secretFromEnv(value: string | undefined, name: string, required: boolean): string | undefined {
  const problem = secretProblem({ name, value, required }, 'node');
  if (problem) throw new ConfigError(problem);
  return value || undefined;
}

/** A PostgreSQL connection string from `name`, refused with one clear line when it cannot be one. */
export function databaseUrlFromEnv(value: string | undefined, name = 'DATABASE_URL'): string {
  const url = requiredEnv(value, name);
  const problem = databaseUrlProblem(url, name);
  if (problem) throw new ConfigError(problem);
  return url;
}

/**
 * The one line an entry point prints for an error of configuration: a ConfigError's message, or
 * a connection failure on `databaseUrl` described with `name`; undefined for anything else.
 */
export function configErrorLine(error: unknown, databaseUrl?: string, name = 'DATABASE_URL'): string | undefined {
  if (error instanceof ConfigError) return error.message;
  return databaseUrl === undefined ? undefined : describeConnectionError(error, databaseUrl, name);
}

/** The tick options the variables set, over the platform's defaults. */
export function tickOptionsFromEnv(env: TickEnv, defaults: { budgetMs: number; pollIntervalMs: number }): TickOptions {
  return {
    budgetMs: intFromEnv(env.TICK_BUDGET_MS, defaults.budgetMs, 'TICK_BUDGET_MS'),
    pollIntervalMs: intFromEnv(env.TICK_POLL_INTERVAL_MS, defaults.pollIntervalMs, 'TICK_POLL_INTERVAL_MS'),
    concurrency: intFromEnv(env.TICK_CONCURRENCY, 10, 'TICK_CONCURRENCY'),
  };
}

/** A platform's stream variables (strings; wrangler `[vars]` may give a number). */
export interface StreamEnv {
  /** How long one SSE connection of GET /v1/jobs/{id}/stream is held, in ms (AppOptions.streamConnectionMs). Default 25 000. */
  STREAM_CONNECTION_MS?: string;
}

/** STREAM_CONNECTION_MS, or undefined (the app's default, 25 s). */
export function streamConnectionMsFromEnv(env: { STREAM_CONNECTION_MS?: string | number }): number | undefined {
  return env.STREAM_CONNECTION_MS === undefined || env.STREAM_CONNECTION_MS === '' ? undefined : intFromEnv(env.STREAM_CONNECTION_MS, 0, 'STREAM_CONNECTION_MS');
}

/** Stream read tokens (skiplock.streamToken) signed with CALLBACK_SECRET, or else API_TOKEN; undefined without one of 16 characters. */
export function streamTokensFromEnv(env: Pick<CallbackEnv, 'CALLBACK_SECRET' | 'API_TOKEN'>): StreamTokenOptions | undefined {
  const secret = env.CALLBACK_SECRET || env.API_TOKEN;
  return secret && secret.length >= 16 ? { secret } : undefined;
}

export interface CallbackEnv {
  /** The HMAC secret of callback URLs (ctx.createCallback), at least 16 characters. Default: API_TOKEN. */
  CALLBACK_SECRET?: string;
  /** Where this deployment is reached from outside (`https://jobs.example.com`): callback URLs start with it and the base path. */
  PUBLIC_URL?: string;
  API_TOKEN?: string;
}

/**
 * Callback URLs from the environment: PUBLIC_URL (plus the app's base path) and CALLBACK_SECRET,
 * or else API_TOKEN. Undefined (ctx.createCallback fails with a clear error) without PUBLIC_URL.
 */
export function callbacksFromEnv(env: CallbackEnv, basePath = ''): CallbackOptions | undefined {
  const secret = env.CALLBACK_SECRET || env.API_TOKEN;
  if (!env.PUBLIC_URL || !secret) return undefined;
  if (secret.length < 16) throw new ConfigError('CALLBACK_SECRET (or API_TOKEN) must be at least 16 characters');
  try {
    new URL(env.PUBLIC_URL);
  } catch {
    throw new ConfigError(`PUBLIC_URL must be an absolute URL, got ${JSON.stringify(env.PUBLIC_URL)}`);
  }
  return { secret, publicUrl: `${env.PUBLIC_URL.replace(/\/+$/, '')}${basePath.replace(/\/+$/, '')}` };
}
