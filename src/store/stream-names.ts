/**
 * The streams a job wrote (migrations/019_streams.sql), for the dashboard's job page: each
 * name with its chunk count and last seq (a stream's seq has no gap, so they are equal), in name
 * order, at most `limit` of them. One statement, an index-only scan of the job's chunk keys.
 */
import { statement, type Statement } from './sql.ts';

export function streamNames(p: { jobId: string; limit?: number }): Statement {
  return statement(
    `SELECT c.stream, count(*)::int AS chunks, max(c.seq)::int AS last_seq
       FROM skiplock.job_stream_chunk c
      WHERE c.job_id = $1::bigint
      GROUP BY c.stream
      ORDER BY c.stream
      LIMIT $2::int`,
    [p.jobId, p.limit ?? 20],
  );
}
