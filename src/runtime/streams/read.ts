/**
 * skiplock.readStream (docs/streams.md): a page of one job's stream, after a seq, in one
 * statement (src/store/streams.ts readChunks). The HTTP route and the client's streamJob read
 * through it.
 */
import * as z from 'zod';
import { SkiplockError } from '../../core/errors.ts';
import { isJobId } from '../../core/job-id.ts';
import { toBool, toDate } from '../../store/rows.ts';
import type { Sql } from '../../store/sql.ts';
import { readChunks } from '../../store/streams.ts';
import { toIssues } from '../tasks/enqueue.ts';
import { DEFAULT_STREAM, STREAM_NAME, STREAM_READ_LIMITS } from './limits.ts';

export const readStreamInputSchema = z.strictObject({
  /** The stream's name (ctx.stream(name)). Default 'default'. */
  name: z.string().regex(STREAM_NAME, 'a stream name is 1 to 64 of A-Z a-z 0-9 _ . : -').optional(),
  /** Only chunks after this seq (the last one read; an SSE Last-Event-ID). Default 0: from the first. */
  after: z.number().int().min(0).max(2_147_483_647).optional(),
  /** At most this many chunks (1 to 1000; default 100). A page also stops near 1 MiB of JSON. */
  limit: z.number().int().min(1).max(STREAM_READ_LIMITS.maxLimit).optional(),
});
export type ReadStreamOptions = z.input<typeof readStreamInputSchema>;

export interface StreamChunk {
  /** 1, 2, 3, … in the stream's order: pass the last one read as `after` to go on. */
  seq: number;
  /** The chunk as written (a string stays a string). */
  data: unknown;
  /** When it was stored (the database's clock). */
  at: Date;
}

export interface ReadStreamResult {
  chunks: StreamChunk[];
  /**
   * True when the job is finished (DONE, DEAD or CANCELLED) and `chunks` ends with the stream's
   * last chunk: nothing more will come (unless a person retries the job). A run's chunks are stored
   * before its job is DONE, so a reader that sees `done` has seen everything.
   */
  done: boolean;
}

const FINISHED = new Set(['DONE', 'DEAD', 'CANCELLED']);

/** readStream: SkiplockError invalid_request for bad options or a malformed id, not_found for no such job. */
export async function readStreamWith(sql: Sql, jobId: string, options: ReadStreamOptions = {}): Promise<ReadStreamResult> {
  if (typeof jobId !== 'string' || !isJobId(jobId)) throw new SkiplockError('invalid_request', 'a job id is a positive integer, as a string', [{ path: ['jobId'], message: 'not a job id' }]);
  const parsed = readStreamInputSchema.safeParse(options ?? {});
  if (!parsed.success) throw new SkiplockError('invalid_request', 'invalid stream read', toIssues(parsed.error));
  const { name = DEFAULT_STREAM, after = 0, limit = STREAM_READ_LIMITS.defaultLimit } = parsed.data;
  const rows = await sql.query(readChunks({ jobId, stream: name, after, limit, maxBytes: STREAM_READ_LIMITS.maxBytes }));
  if (rows.length === 0) throw new SkiplockError('not_found', `no job ${jobId}`);
  const kept = rows.filter((r) => r.seq !== null && toBool(r.kept));
  const more = rows.some((r) => r.seq !== null && !toBool(r.kept));
  return {
    chunks: kept.map((r) => ({ seq: Number(r.seq), data: r.data, at: toDate(r.created_at) })),
    done: FINISHED.has(String(rows[0]!.status)) && !more,
  };
}
