import type { ErrorIssue } from './issue.ts';
import { storableText } from './json.ts';

/** Error codes shared by the library, the CLI and the HTTP API (mapped to status codes at the edge). */
export type ErrorCode =
  | 'unauthorized'
  | 'invalid_json'
  | 'invalid_request'
  | 'unknown_task'
  | 'invalid_payload'
  | 'not_found'
  | 'conflict'
  | 'payload_too_large'
  /** HTTP only: a known path asked with a method it does not serve (405, with `Allow`). */
  | 'method_not_allowed'
  /** Too many wrong tokens from this source: wait for Retry-After (docs/http-api.md, "Failed tokens"). */
  | 'too_many_requests'
  /** A secret the deployment needs (API_TOKEN, …) is missing or too short: fix the configuration. */
  | 'not_configured'
  /** The database lacks skiplock's tables, or has an older schema: run `npx skiplock migrate`. */
  | 'not_migrated';

export type { ErrorIssue } from './issue.ts';

/** The one error type skiplock throws at its callers. */
export class SkiplockError extends Error {
  readonly code: ErrorCode;
  readonly issues: ErrorIssue[] | undefined;

  constructor(code: ErrorCode, message: string, issues?: ErrorIssue[]) {
    super(message);
    this.name = 'SkiplockError';
    this.code = code;
    this.issues = issues;
  }
}

/**
 * The database lacks skiplock's schema (or a migration this version ships): every call that needs
 * the database rejects with it until the migrations run. A SkiplockError with code `not_migrated`;
 * skiplock's own routes answer it as 503. Your own route that enqueues can catch it:
 * `if (error instanceof NotMigratedError) return new Response('try again later', { status: 503 })`.
 */
export class NotMigratedError extends SkiplockError {
  declare readonly code: 'not_migrated';
  constructor(message: string, options?: ErrorCauseOptions) {
    super('not_migrated', message);
    this.name = 'NotMigratedError';
    if (options && 'cause' in options) Object.defineProperty(this, 'cause', { value: options.cause, writable: true, configurable: true });
  }
}

/** Refuses a count option outside 1…max (a page size, a number of minutes) as invalid_request. */
export function checkRange(name: string, value: number, max: number): void {
  if (!Number.isInteger(value) || value < 1 || value > max)
    throw new SkiplockError('invalid_request', `${name} must be an integer from 1 to ${max}`, [{ path: [name], message: 'out of range' }]);
}

/**
 * Thrown by a handler (or any error with `permanent: true`) to say that retrying cannot help:
 * the job goes to DEAD on this attempt, for a person to review.
 */
/**
 * The options of an error (its cause): ES2022's ErrorOptions, spelled out so that the public types
 * compile for a project whose `lib` is older (create-cloudflare's `es2021`).
 */
export interface ErrorCauseOptions {
  cause?: unknown;
}

export class PermanentError extends Error {
  readonly permanent = true;
  constructor(message: string, options?: ErrorCauseOptions) {
    super(message, options);
    this.name = 'PermanentError';
  }
}

/**
 * What ctx.invoke rejects with when the child job ended DEAD or CANCELLED. Permanent: the parent
 * does not spend its retries re-throwing a stored failure (a handler may catch it and go on).
 * Retry the child (a person's retry) instead: when it then ends DONE, its parent runs again.
 */
export class ChildJobError extends PermanentError {
  /** The child job's id. */
  readonly childId: string;
  /** The child's task. */
  readonly childTask: string;
  /** How the child ended. */
  readonly childStatus: 'DEAD' | 'CANCELLED';
  /** The child's last_error (or why it was cancelled); null when it has none. */
  readonly childError: string | null;
  /** The id of the ctx.invoke step. */
  readonly stepId: string;
  constructor(p: { stepId: string; childId: string; childTask: string; childStatus: 'DEAD' | 'CANCELLED'; childError: string | null }) {
    super(`child job ${p.childId} (task ${p.childTask}, step ${JSON.stringify(p.stepId)}) ended ${p.childStatus}${p.childError ? `: ${p.childError}` : ''}`);
    this.name = 'ChildJobError';
    this.childId = p.childId;
    this.childTask = p.childTask;
    this.childStatus = p.childStatus;
    this.childError = p.childError;
    this.stepId = p.stepId;
  }
}

/** A TypeError for a mistake in the handler's code (a bad step id, a sleep of NaN): no retry can help. */
export function permanentTypeError(message: string): TypeError {
  return Object.assign(new TypeError(message), { permanent: true as const });
}

export function isPermanent(error: unknown): boolean {
  try {
    return typeof error === 'object' && error !== null && (error as { permanent?: unknown }).permanent === true;
  } catch {
    return false; // a getter or Proxy trap that throws: not marked permanent
  }
}

/**
 * A short description of anything thrown, for last_error. Never throws itself, whatever was
 * thrown (an object without a prototype, a getter or toString that throws, a revoked Proxy).
 */
export function describeError(error: unknown): string {
  const text = storableText(printThrown(error));
  return text.length > 2000 ? `${text.slice(0, 2000)}…` : text;
}

function printThrown(error: unknown): string {
  try {
    if (error instanceof Error) return `${String(error.name)}: ${String(error.message)}`;
    return String(error);
  } catch {
    // String() of an object without a prototype throws: show its own fields, as JSON when it can be.
    try {
      const json = JSON.stringify(error);
      if (typeof json === 'string') return `a thrown object ${json}`;
    } catch {
      // fall through
    }
    return `a thrown ${typeof error} that cannot be printed`;
  }
}
