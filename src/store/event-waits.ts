/**
 * Waits and callbacks (migration 016): the statements of ctx.waitForEvent, ctx.createCallback and
 * ctx.waitForCallback, the POST that completes a callback, and the wake-up of the jobs whose wait
 * completed (wakeCte, which a send uses too). A wait registration starts with eventLock, in its own
 * statement of the batch, for the race src/store/events.ts describes. `$1` is the clock, as
 * everywhere.
 */
import { MS, NOW, clock, leaseUntil, type Clock } from './clock.ts';
import { statement, type Statement } from './sql.ts';
import { markerParts } from './steps.ts';
import type { StepFence } from './steps.ts';

/**
 * Makes the jobs of `from` (a CTE of `job_id`) due now because one of their waits completed: a
 * WAITING one (a timed wait too) is QUEUED, due now; a RUNNING one gets wait_woken, which its result
 * write reads. Jobs that finished meanwhile are left alone.
 */
export function wakeCte(name: string, from: string): string {
  return `${name} AS (
       UPDATE skiplock.queue j SET
         status = CASE WHEN j.status = 'WAITING' THEN 'QUEUED' ELSE j.status END,
         run_at = CASE WHEN j.status = 'WAITING' THEN ${NOW} ELSE j.run_at END,
         wait_woken = (j.status = 'RUNNING'), updated_at = ${NOW}
        WHERE j.id = ANY (ARRAY(SELECT job_id FROM ${from})) AND j.status IN ('QUEUED', 'RUNNING', 'WAITING')
       RETURNING j.id
     )`;
}

/**
 * `fence AS (...)`: the job still RUNNING under this run's lease (as steps.ts's fence), its
 * step_count bumped by `$8` (and the ctx.patched markers this write carries: markerParts) and its
 * lease extended.
 */
function fence(f: StepFence, values: unknown[]): string {
  const marks = markerParts(f, values);
  return `fence AS (
       UPDATE skiplock.queue j SET step_count = j.step_count + $8::int${marks.count},
              locked_until = greatest(j.locked_until, ${leaseUntil('$6', '$5')}), updated_at = ${NOW}
        WHERE j.id = $2::bigint AND j.status = 'RUNNING' AND j.locked_by = $3 AND j.attempts = $4
       RETURNING j.id
     )${marks.cte}`;
}
const fenceValues = (f: StepFence) => [clock(f.now), f.jobId, f.lockedBy, f.attempt, f.leaseMs, f.leaseGraceMs];

/** What a wait's statement answers: whether the lease held, and the step as it now is. */
export interface WaitRow {
  held: number;
  status: 'waiting' | 'done' | null;
  output: unknown;
  wake_at: unknown;
}

/** The event ids this job's waits took: a wait takes none of them again (ctx.waitForEvent and ctx.waitForAny alike). */
const CONSUMED = `ARRAY(SELECT c.event_id FROM skiplock.job_step c
                          WHERE c.job_id = $2::bigint AND c.kind IN ('event', 'any-event') AND c.event_id IS NOT NULL)`;

/**
 * What the two event waits share (`$7` the step id, `$8` 1 when new, `$9` its seq, `$12` the
 * timeout): the job's creation, the step as recorded (`prior`), then — after the wait's own
 * `found` (at most one event, with `output`) — the step written: done with the event found, done
 * with null when the timeout is 0 or, for a step recorded waiting, has passed; else waiting.
 */
function waitStatement(p: { kind: 'event' | 'any-event'; found: string; output: string; columns: string; params: string }, fenced: string, values: unknown[]): Statement {
  return statement(
    `WITH job_row AS (
       SELECT j.created_at FROM skiplock.queue j WHERE j.id = $2::bigint AND j.status = 'RUNNING' AND j.locked_by = $3 AND j.attempts = $4
     ),
     prior AS (SELECT s.status, s.output, s.wake_at FROM skiplock.job_step s WHERE s.job_id = $2::bigint AND s.id = $7),
     found AS (${p.found}),
     ${fenced},
     written AS (
       INSERT INTO skiplock.job_step AS s (job_id, id, seq, kind, status, output, attempts, started_at, finished_at, wake_at, ${p.columns}, event_id)
       SELECT f.id, $7, $9, '${p.kind}', CASE WHEN x.id IS NOT NULL OR $12::bigint <= 0 THEN 'done' ELSE 'waiting' END,
              CASE WHEN x.id IS NOT NULL THEN ${p.output} END, 0, ${NOW},
              CASE WHEN x.id IS NOT NULL OR $12::bigint <= 0 THEN ${NOW} END, ${NOW} + $12::bigint ${MS}, ${p.params}, x.id
         FROM fence f LEFT JOIN found x ON true
       ON CONFLICT (job_id, id) DO UPDATE SET status = 'done', output = excluded.output, event_id = excluded.event_id,
              finished_at = CASE WHEN excluded.event_id IS NULL THEN s.wake_at ELSE ${NOW} END
        WHERE s.status = 'waiting' AND (excluded.event_id IS NOT NULL OR s.wake_at <= ${NOW})
       RETURNING s.status, s.output, s.wake_at
     )
     SELECT (SELECT count(*) FROM fence)::int AS held, coalesce(w.status, p.status) AS status,
            CASE WHEN w.status IS NOT NULL THEN w.output ELSE p.output END AS output, coalesce(w.wake_at, p.wake_at) AS wake_at
       FROM (SELECT 1) one LEFT JOIN written w ON true LEFT JOIN prior p ON true`,
    values,
  );
}

/** An event a wait may take: stored after the job was created, before the timeout of a step recorded waiting, not taken by the job's waits. */
const TAKEABLE = `e.created_at > r.created_at
          AND NOT EXISTS (SELECT 1 FROM prior WHERE prior.status <> 'waiting' OR prior.wake_at <= e.created_at)
          AND e.id <> ALL (${CONSUMED})`;

/**
 * ctx.waitForEvent reached (after eventLock, in one batch): the first event of this name (and
 * key) stored after the job was created and not consumed by an earlier wait of this job (the
 * event ids its other event steps recorded) completes the step at once; otherwise the step is
 * recorded waiting — or, already recorded waiting (a run resumed for another reason), looked at
 * again: completed by such an event stored before its timeout (wake_at: both instants are the
 * database's clock), timed out when its wake_at has passed, or left waiting.
 * Answers held, status, output ({data, eventId}, or null after a timeout) and wake_at.
 */
export function waitForEvent(p: StepFence & { id: string; seq: number; isNew: boolean; name: string; key: string | null; timeoutMs: number | null }): Statement {
  const values: unknown[] = [...fenceValues(p), p.id, p.isNew ? 1 : 0, p.seq, p.name, p.key, p.timeoutMs];
  const found = `SELECT e.id, e.data FROM skiplock.event e, job_row r
        WHERE e.name = $10 AND ${p.key === null ? 'true' : 'e.key = $11'} AND ${TAKEABLE}
        ORDER BY e.created_at, e.id
        LIMIT 1`;
  const output = `jsonb_build_object('data', x.data, 'eventId', x.id::text)`;
  return waitStatement({ kind: 'event', found, output, columns: 'event_name, event_key', params: '$10, $11' }, fence(p, values), values);
}

/** A ctx.waitForAny alternative: an event name, and a key or null (every key of the name). */
export interface EventAlternative {
  name: string;
  key: string | null;
}

/** An alternative as event_alternatives stores it (migration 020): `name`, or `name key`. */
export const alternativeToken = (a: EventAlternative) => (a.key === null ? a.name : `${a.name} ${a.key}`);

/**
 * ctx.waitForAny reached (after eventWaitLocks, in one batch): as waitForEvent, over several
 * alternatives. Of each alternative, the first event it may take (one index probe each: by name,
 * or by name and key), and of those the earliest, by the order waitForEvent uses (created_at, id),
 * completes the step at once with {event, key, data, eventId}; otherwise the step is recorded
 * waiting with its alternatives' tokens, for a send to find (src/store/events.ts), or — recorded
 * already — looked at again, timed out, or left waiting. Answers as waitForEvent.
 */
export function waitForAnyEvent(p: StepFence & { id: string; seq: number; isNew: boolean; alternatives: readonly EventAlternative[]; timeoutMs: number | null }): Statement {
  const values: unknown[] = [
    ...fenceValues(p), p.id, p.isNew ? 1 : 0, p.seq, p.alternatives.map((a) => a.name), p.alternatives.map((a) => a.key), p.timeoutMs,
    p.alternatives.map(alternativeToken),
  ];
  const pick = (match: string) => `(SELECT e.id, e.name, e.key, e.data, e.created_at FROM skiplock.event e, job_row r
              WHERE ${match} AND ${TAKEABLE}
              ORDER BY e.created_at, e.id LIMIT 1)`;
  const found = `SELECT x.id, x.name, x.key, x.data FROM unnest($10::text[], $11::text[]) AS a(name, key)
        CROSS JOIN LATERAL (
          ${pick('a.key IS NULL AND e.name = a.name')}
          UNION ALL
          ${pick('e.name = a.name AND e.key = a.key')}
        ) x
        ORDER BY x.created_at, x.id
        LIMIT 1`;
  const output = `jsonb_build_object('event', x.name, 'key', x.key, 'data', x.data, 'eventId', x.id::text)`;
  return waitStatement({ kind: 'any-event', found, output, columns: 'event_alternatives', params: '$13::text[]' }, fence(p, values), values);
}

/**
 * ctx.createCallback reached for the first time: its step, waiting (until `timeoutMs` from now,
 * or for ever). Answers held.
 */
export function createCallbackStep(p: StepFence & { id: string; seq: number; timeoutMs: number | null }): Statement {
  const values: unknown[] = [...fenceValues(p), p.id, 1, p.seq, p.timeoutMs];
  const fenced = fence(p, values);
  return statement(
    `WITH ${fenced}
     INSERT INTO skiplock.job_step (job_id, id, seq, kind, status, attempts, started_at, wake_at)
     SELECT f.id, $7, $9, 'callback', 'waiting', 0, ${NOW}, ${NOW} + $10::bigint ${MS} FROM fence f
     RETURNING 1 AS held`,
    values,
  );
}

/**
 * ctx.waitForCallback: the callback step as it is now, timed out first when its wake_at has
 * passed (a fact of the clock, like a sleep's end: no fence). Answers status, output, wake_at.
 */
export function readCallbackStep(p: { now: Clock; jobId: string; id: string }): Statement {
  return statement(
    `WITH timed_out AS (
       UPDATE skiplock.job_step s SET status = 'done', finished_at = s.wake_at
        WHERE s.job_id = $2::bigint AND s.id = $3 AND s.kind = 'callback' AND s.status = 'waiting' AND s.wake_at <= ${NOW}
       RETURNING s.status, s.output, s.wake_at
     )
     SELECT * FROM timed_out
     UNION ALL
     SELECT s.status, s.output, s.wake_at FROM skiplock.job_step s
      WHERE s.job_id = $2::bigint AND s.id = $3 AND s.kind = 'callback' AND NOT EXISTS (SELECT 1 FROM timed_out)`,
    [clock(p.now), p.jobId, p.id],
  );
}

/**
 * A POST to a callback URL (its token already verified): the waiting callback step completes
 * with `{data}` and its job wakes, in one statement — once. Answers `completed` (1 or 0) and
 * `status`, the step's status before (null: no such step).
 */
export function completeCallback(p: { now: Clock; jobId: string; id: string; data: string | null }): Statement {
  return statement(
    `WITH completed AS (
       UPDATE skiplock.job_step s SET status = 'done', output = jsonb_build_object('data', $4::jsonb), finished_at = ${NOW},
              duration_ms = least(greatest(round(extract(epoch FROM ${NOW} - s.started_at) * 1000), 0), 2147483647)::int
        WHERE s.job_id = $2::bigint AND s.id = $3 AND s.kind = 'callback' AND s.status = 'waiting'
          AND (s.wake_at IS NULL OR s.wake_at > ${NOW})
          AND EXISTS (SELECT 1 FROM skiplock.queue j WHERE j.id = s.job_id)
       RETURNING s.job_id
     ),
     ${wakeCte('woken', 'completed')}
     SELECT (SELECT count(*) FROM completed)::int AS completed,
            (SELECT s.status FROM skiplock.job_step s WHERE s.job_id = $2::bigint AND s.id = $3 AND s.kind = 'callback') AS status`,
    [clock(p.now), p.jobId, p.id, p.data],
  );
}
