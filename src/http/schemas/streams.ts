/** GET /v1/jobs/{id}/stream: its path, query and header (docs/streams.md, "Reading over HTTP"). */
import * as z from 'zod';
import { isJobId } from '../../core/job-id.ts';
import { STREAM_NAME } from '../../runtime/streams/index.ts';
import { storableText } from './shared.ts';

/** A seq as a URL or a header carries it: digits, 0 to 2^31 − 1. */
const seqText = (what: string) =>
  z
    .string()
    .regex(/^\d{1,10}$/, `${what} is a chunk's seq: an integer ≥ 0`)
    .transform(Number)
    .refine((n) => n <= 2_147_483_647, `${what} is at most 2147483647`);

export const StreamParams = z.object({
  id: z
    .string()
    .refine(isJobId, 'a job id is a positive integer')
    .openapi({ param: { name: 'id', in: 'path' }, example: '42', pattern: '^[1-9][0-9]{0,18}$' }),
});

export const StreamQuery = z.object({
  name: z
    .string()
    .regex(STREAM_NAME, 'a stream name is 1 to 64 of A-Z a-z 0-9 _ . : -')
    .optional()
    .openapi({ description: "The stream's name (ctx.stream(name)). Default `default`.", pattern: STREAM_NAME.source, example: 'default' }),
  after: seqText('after')
    .optional()
    .openapi({ type: 'string', pattern: '^[0-9]{1,10}$', description: 'Only the chunks after this seq. Default 0 (from the first). The Last-Event-ID header, when sent, takes its place.' }),
  token: storableText
    .max(200)
    .optional()
    .openapi({ description: "A read token from skiplock.streamToken(jobId), instead of the bearer token (for a browser's EventSource): accepted on this route only, for its job only, until it expires." }),
});

export const StreamHeaders = z.object({
  'last-event-id': seqText('Last-Event-ID')
    .optional()
    .openapi({ type: 'string', pattern: '^[0-9]{1,10}$', description: 'The last seq this reader got (EventSource sends it when it reconnects): the stream resumes after it.' }),
});

export const SSE_DESCRIPTION = [
  'Server-Sent Events. One event per chunk: `id:` its seq, `data:` the chunk as JSON (a string chunk is a JSON string, so a newline in it cannot break the framing).',
  'Then `event: end` once the job is finished (DONE, DEAD or CANCELLED) and every chunk was sent; a reader arriving after the end gets every chunk after its seq, then `end`.',
  'Comment lines (`: keep-alive`) every 15 s while the stream is silent. A connection ends (without `end`) after the deployment\'s connection life (25 s by default);',
  'EventSource reconnects with Last-Event-ID by itself. Close the EventSource on `end`, or it reconnects and gets `end` again.',
].join(' ');
