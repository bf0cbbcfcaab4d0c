/** The error the client throws for every answer of the API that is not a success. */

import type { ErrorCode } from '../core/errors.ts';

/** The API's error codes (CONTRACT.md), `internal` for a 5xx, `unexpected_response` when the body is not the API's. */
export type ApiErrorCode = ErrorCode | 'internal' | 'unexpected_response';

export interface ApiErrorIssue {
  path: (string | number)[];
  message: string;
}

/** The body of an error answer: `{"error": {"code", "message", "issues"?}}`. */
export interface ApiErrorBody {
  error: { code: ApiErrorCode; message: string; issues?: ApiErrorIssue[] };
}

/** A refused or failed request: the HTTP status and the API's `{code, message, issues}`. */
export class SkiplockApiError extends Error {
  /** The HTTP status of the answer. */
  readonly status: number;
  readonly code: ApiErrorCode;
  /** Where the input was wrong (invalid_request, invalid_payload), path by path. */
  readonly issues: ApiErrorIssue[] | undefined;

  constructor(status: number, body: ApiErrorBody['error']) {
    super(body.message);
    this.name = 'SkiplockApiError';
    this.status = status;
    this.code = body.code;
    this.issues = body.issues;
  }
}

/** The error of an answer whose status is not 2xx; a body that is not the API's still gives one. */
export async function errorFromResponse(response: Response): Promise<SkiplockApiError> {
  const text = await response.text().catch(() => '');
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    body = undefined;
  }
  const error = (body as Partial<ApiErrorBody> | undefined)?.error;
  if (error && typeof error.code === 'string' && typeof error.message === 'string') return new SkiplockApiError(response.status, error);
  return new SkiplockApiError(response.status, {
    code: response.status >= 500 ? 'internal' : 'unexpected_response',
    message: `HTTP ${response.status}${text ? `: ${text.length > 200 ? `${text.slice(0, 200)}…` : text}` : ''}`,
  });
}
