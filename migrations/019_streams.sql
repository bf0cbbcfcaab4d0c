-- Streams (issue 34): a run's output, written as it runs (ctx.stream(name).write(chunk)) and read
-- in order by anyone (skiplock.readStream, later GET /v1/jobs/:id/stream), kept in the job's own
-- database (docs/streams.md).
--
-- One row per chunk. seq numbers a job's stream 1, 2, 3, … in the order its chunks were written;
-- (segment, ordinal) is the chunk's place in the run — the steps the handler had reached before
-- it, and its rank among that stream's chunks since — the same on every replay or retry of the
-- same code, so a chunk written again by a later attempt is a no-op (the first write wins).
--
-- No foreign key to skiplock.job: the statements that delete jobs (retention's prune, the bulk
-- delete) delete their chunks in the same statement, one set-based DELETE instead of a cascade
-- trigger per deleted job, and a chunk insert checks no foreign key per row. The flush that
-- writes chunks is fenced on the job being RUNNING under its run's lease, and a job is deleted
-- only when finished, so no chunk is written for a job being deleted. Keyed by job id only, so
-- the job table can change shape (issue 33) without this one.
CREATE TABLE skiplock.job_stream_chunk (
  job_id     bigint      NOT NULL,
  stream     text        NOT NULL DEFAULT 'default' CHECK (length(stream) BETWEEN 1 AND 64),
  seq        integer     NOT NULL CHECK (seq >= 1),
  segment    integer     NOT NULL CHECK (segment >= 0),
  ordinal    integer     NOT NULL CHECK (ordinal >= 1),
  data       jsonb       NOT NULL,
  -- Bytes of the chunk's JSON text (what a read's size cap counts).
  bytes      integer     NOT NULL CHECK (bytes >= 0),
  created_at timestamptz NOT NULL DEFAULT now(),
  -- A reader's page: WHERE job_id AND stream AND seq > after ORDER BY seq.
  PRIMARY KEY (job_id, stream, seq),
  -- The identity that makes a chunk written again a no-op.
  UNIQUE (job_id, stream, segment, ordinal)
);
