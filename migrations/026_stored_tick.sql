-- The tick's commonest statement stored as a function (issue 33): completeAndClaim's write of DONE
-- results with the plain claim and no probe, its text verbatim (src/store/stored-tick.ts). Drivers
-- that do not prepare statements (Neon over HTTP or WebSocket, pg behind a pooler without them) call
-- it instead of sending the text, and PostgreSQL keeps its plan per connection rather than parsing
-- and planning about 4,500 characters of SQL on every call. test/store/stored-tick.test.ts fails when
-- completeAndClaim's text and this body differ: a change to the statement needs a migration that
-- creates the function again.

CREATE TYPE skiplock.tick_answer AS (
  written jsonb, cancelled jsonb, schedule_due boolean, reap_due boolean, events_due boolean, stranded_due boolean,
  id bigint, task text, priority smallint, attempts integer, max_attempts integer, timeout_ms integer, cancel_requested boolean,
  last_error text, schedule_name text, history jsonb, parent_id bigint, pending_children integer, step_count integer,
  flow_key text, rate_key text, fair_key text, batch_key text, run_at_ms bigint, locked_until_ms bigint, created_at_ms bigint,
  started_at_ms bigint, payload jsonb, idempotency_key text, schedule_state jsonb, traceparent text, parent_step text,
  scheduled_for_ms bigint
);

CREATE OR REPLACE FUNCTION skiplock.tick_done_claim(timestamptz, text, bigint[], int, int, int, int, text[], text[], int[], text[], jsonb[], jsonb[], text[]) RETURNS SETOF skiplock.tick_answer
  LANGUAGE plpgsql VOLATILE
AS $tick$
BEGIN
  RETURN QUERY WITH ended AS (
       DELETE FROM skiplock.queue j
       WHERE j.id = ANY ($3::bigint[]) AND j.status = 'RUNNING'
         AND j.locked_by = ($11::text[])[array_position($3::bigint[], j.id)] AND j.attempts = ($10::int[])[array_position($3::bigint[], j.id)]
       RETURNING j.*
     ),
     written AS (
       UPDATE skiplock.job_record r SET
         priority = e.priority, run_at = coalesce(e.run_at, r.run_at), attempts = e.attempts, last_error = e.last_error, started_at = e.started_at, history = e.history, progress = coalesce(($13::jsonb[])[array_position($3::bigint[], e.id)], e.progress), flow_key = e.flow_key, rate_key = e.rate_key, rate_attempt = e.rate_attempt, pending_children = e.pending_children, step_count = e.step_count, locked_by = NULL, locked_until = NULL, cancel_requested = false, wait_woken = false, debounce_key = NULL, updated_at = coalesce($1::timestamptz, now()), status = 'DONE', result = ($12::jsonb[])[array_position($3::bigint[], e.id)], finished_at = coalesce($1::timestamptz, now()), finished_by = e.locked_by, finished_traceparent = ($14::text[])[array_position($3::bigint[], e.id)]
       FROM ended e
       WHERE r.id = e.id
       RETURNING r.id, r.status
     ),
     fair_queued AS MATERIALIZED (
       SELECT EXISTS (SELECT 1 FROM skiplock.queue WHERE status <> 'RUNNING' AND run_at IS NOT NULL AND fair_key IS NOT NULL
                         AND batch_key IS NULL AND flow_key IS NULL) AS fair
     ),
     next AS MATERIALIZED (
       SELECT id FROM skiplock.claimable_jobs($4, coalesce($1::timestamptz, now()), $5, ARRAY(SELECT unnest($8::text[]) EXCEPT SELECT name FROM skiplock.paused_task)) AS id WHERE NOT (SELECT fair FROM fair_queued)
       UNION ALL
       SELECT id FROM skiplock.claim_fair_jobs($4, coalesce($1::timestamptz, now()), $5, ARRAY(SELECT unnest($8::text[]) EXCEPT SELECT name FROM skiplock.paused_task)) AS id WHERE (SELECT fair FROM fair_queued)
     ),
     claimed AS (
       UPDATE skiplock.queue j SET
         status = 'RUNNING', attempts = j.attempts + 1, locked_by = $2,
         locked_until = coalesce($1::timestamptz, now()) + least(j.timeout_ms + $7, $6) * interval '1 millisecond', updated_at = coalesce($1::timestamptz, now()),
         started_at = coalesce($1::timestamptz, now()), progress = NULL, debounce_key = NULL
       WHERE j.id = ANY (ARRAY(SELECT id FROM next))
       RETURNING j.id, j.task, j.priority, j.attempts, j.max_attempts, j.timeout_ms, j.cancel_requested, j.last_error,
         j.schedule_name, j.history, j.parent_id, j.pending_children, j.step_count, j.flow_key, j.rate_key, j.fair_key, j.batch_key, trunc(extract(epoch FROM j.run_at) * 1000)::bigint AS run_at_ms,
         trunc(extract(epoch FROM j.locked_until) * 1000)::bigint AS locked_until_ms, trunc(extract(epoch FROM j.created_at) * 1000)::bigint AS created_at_ms,
         trunc(extract(epoch FROM j.started_at) * 1000)::bigint AS started_at_ms
     ),
     claimed_jobs AS (
       SELECT c.*, r.payload, r.idempotency_key, r.schedule_state, r.traceparent, r.parent_step, trunc(extract(epoch FROM r.scheduled_for) * 1000)::bigint AS scheduled_for_ms
         FROM claimed c JOIN skiplock.job_record r ON r.id = c.id
        WHERE r.id = ANY (ARRAY(SELECT id FROM claimed))
     )
     SELECT w.written, w.cancelled, w.schedule_due, w.reap_due, w.events_due, w.stranded_due, claimed_jobs.*
       FROM (SELECT coalesce(jsonb_agg(id::text), '[]'::jsonb) AS written,
                    coalesce(jsonb_agg(id::text) FILTER (WHERE status = 'CANCELLED'), '[]'::jsonb) AS cancelled,
                    ($9::text[] IS NOT NULL AND (
                       EXISTS (SELECT 1 FROM skiplock.schedule s WHERE s.enabled AND s.next_run_at <= coalesce($1::timestamptz, now())
                                  AND (s.source = 'dynamic' OR s.name = ANY ($9::text[])) AND s.task = ANY ($8::text[]))
                    OR EXISTS (SELECT 1 FROM skiplock.schedule s WHERE s.enabled AND s.next_run_at IS NULL
                                  AND (s.source = 'dynamic' OR s.name = ANY ($9::text[])) AND s.task = ANY ($8::text[])))) AS schedule_due,
                    NULL::boolean AS reap_due,
                    NULL::boolean AS events_due,
                    NULL::boolean AS stranded_due
               FROM written) AS w
       FULL JOIN claimed_jobs ON false;
END
$tick$;
