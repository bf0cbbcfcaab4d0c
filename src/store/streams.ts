/**
 * Streams (migrations/019_streams.sql, docs/streams.md): the statement that flushes a run's
 * buffered chunks, and the one that reads a stream's page. Time: `$1` is the clock.
 */
import { NOW, clock, type Clock } from './clock.ts';
import { preparedStatement, statement, type Statement } from './sql.ts';

/** A chunk to write: its stream, its place in the run (segment, ordinal), its JSON and that JSON's bytes. */
export interface ChunkRow {
  stream: string;
  segment: number;
  ordinal: number;
  /** The chunk's value (JSON: a string is stored as a JSON string). */
  data: unknown;
  bytes: number;
}

/** Who may write a job's chunks: the run that holds it (as a result or a step write is fenced). */
export interface ChunkFence {
  now: Clock;
  jobId: string;
  lockedBy: string;
  attempt: number;
}

/**
 * Writes a run's buffered chunks, in order, in one statement — only while the job is RUNNING
 * under this run's lease (locked_by + attempts; its queue row is locked FOR SHARE, so a claim, a
 * reaper or an end that takes the job over waits for this statement, and one that went first makes
 * it write nothing). A chunk whose (stream, segment, ordinal) is stored already — an earlier attempt, or a
 * replay, wrote it — is skipped: the first write wins. The others take the next seq of their
 * stream (its max + their rank), so a stream's seq has no gap. One run's flushes must not overlap
 * (the runtime sends them one after another): each reads its stream's max seq.
 *
 * Answers one row: `held` 1 when the fence held (0: the lease is lost, nothing written), and
 * `written`, the chunks inserted.
 */
export function flushChunks(p: ChunkFence & { chunks: readonly ChunkRow[] }): Statement {
  const input = JSON.stringify(p.chunks.map((c, n) => ({ n, s: c.stream, g: c.segment, o: c.ordinal, d: c.data ?? null, b: c.bytes })));
  return preparedStatement(
    `WITH fence AS (
       SELECT j.id FROM skiplock.queue j
        WHERE j.id = $2::bigint AND j.status = 'RUNNING' AND j.locked_by = $3 AND j.attempts = $4
        FOR SHARE
     ),
     input AS MATERIALIZED (SELECT i.* FROM jsonb_to_recordset($5::jsonb) AS i(n int, s text, g int, o int, d jsonb, b int)),
     fresh AS MATERIALIZED (
       SELECT f.id AS job_id, i.s, i.g, i.o, i.d, i.b, row_number() OVER (PARTITION BY i.s ORDER BY i.n) AS k
         FROM fence f CROSS JOIN input i
        WHERE NOT EXISTS (SELECT 1 FROM skiplock.job_stream_chunk c WHERE c.job_id = f.id AND c.stream = i.s AND c.segment = i.g AND c.ordinal = i.o)
     ),
     top AS (
       SELECT t.s, coalesce((SELECT max(c.seq) FROM skiplock.job_stream_chunk c WHERE c.job_id = $2::bigint AND c.stream = t.s), 0) AS seq
         FROM (SELECT DISTINCT s FROM fresh) t
     ),
     written AS (
       INSERT INTO skiplock.job_stream_chunk (job_id, stream, seq, segment, ordinal, data, bytes, created_at)
       SELECT x.job_id, x.s, t.seq + x.k, x.g, x.o, x.d, x.b, ${NOW}
         FROM fresh x JOIN top t ON t.s = x.s
       ON CONFLICT (job_id, stream, segment, ordinal) DO NOTHING
       RETURNING 1
     )
     SELECT (SELECT count(*)::int FROM fence) AS held, (SELECT count(*)::int FROM written) AS written`,
    [clock(p.now), p.jobId, p.lockedBy, p.attempt, input],
  );
}

/**
 * A page of one stream: the job's status, and its chunks after `after` in seq order — at most
 * `limit` of them, and no more than `maxBytes` of JSON (the first chunk always, whatever its size).
 * No row: no such job. Otherwise one row per chunk read plus the first one left out (`kept`
 * false, no data: there is more), or a single row with a null seq when there is nothing after.
 */
export function readChunks(p: { jobId: string; stream: string; after: number; limit: number; maxBytes: number }): Statement {
  return statement(
    `SELECT j.status, c.seq, c.data, c.created_at, c.kept
       FROM skiplock.job j
       LEFT JOIN LATERAL (
         SELECT w.seq, w.created_at, w.kept, CASE WHEN w.kept THEN w.data END AS data
           FROM (SELECT p.seq, p.data, p.created_at,
                        (row_number() OVER (ORDER BY p.seq) <= $4 AND sum(p.bytes) OVER (ORDER BY p.seq) - p.bytes < $5) AS kept
                   FROM (SELECT c.seq, c.data, c.created_at, c.bytes FROM skiplock.job_stream_chunk c
                          WHERE c.job_id = j.id AND c.stream = $2 AND c.seq > $3 ORDER BY c.seq LIMIT $4::int + 1) p) w
       ) c ON true
      WHERE j.id = $1::bigint
      ORDER BY c.seq`,
    [p.jobId, p.stream, p.after, p.limit, p.maxBytes],
  );
}

/** For a statement that deletes jobs: a CTE deleting their chunks, `deleted` naming a CTE that returns their ids (`id`). */
export function deleteChunksCte(deleted: string): string {
  return `deleted_chunks AS (DELETE FROM skiplock.job_stream_chunk c USING ${deleted} d WHERE c.job_id = d.id)`;
}
