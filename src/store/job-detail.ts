/**
 * One job with its durable steps and its children (migrations/012_durable_steps.sql), read in one
 * statement: the single read path of GET /v1/jobs/:id and the dashboard's job page. Lists of jobs
 * never load steps.
 */
import type { JobChild, JobDetail, JobStatus } from '../core/types.ts';
import { jobStepToJson, jobToJson, mapJob, mapJobStep } from './rows.ts';
import { statement, type Row, type Statement } from './sql.ts';

/** Children listed with a job, at most (the first by id); its invoke steps name every child. */
export const CHILD_LIMIT = 1000;

/** An instant as JSON text that every driver maps alike: ISO-8601 in UTC, to the millisecond. */
const iso = (column: string) => `to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;

/**
 * The job's row, `steps` (a JSON array of its job_step rows by seq, read on the primary key) and
 * `children` (its first `childLimit` children by id, their records read on job_parent_idx, their
 * live status from the queue). Ids are text inside
 * the JSON: int8 exceeds JS numbers. No row when the job does not exist.
 */
export function getJobDetail(p: { id: string; childLimit?: number }): Statement {
  return statement(
    `SELECT j.*,
       (SELECT coalesce(jsonb_agg(jsonb_build_object(
                 'id', s.id, 'seq', s.seq, 'kind', s.kind, 'status', s.status, 'output', s.output, 'error', s.error,
                 'attempts', s.attempts, 'started_at', ${iso('s.started_at')}, 'finished_at', ${iso('s.finished_at')},
                 'duration_ms', s.duration_ms, 'wake_at', ${iso('s.wake_at')}, 'child_id', s.child_id::text, 'child_task', s.child_task,
                 'event_name', s.event_name, 'event_key', s.event_key, 'event_id', s.event_id::text, 'event_alternatives', s.event_alternatives)
               ORDER BY s.seq), '[]'::jsonb)
          FROM skiplock.job_step s WHERE s.job_id = j.id) AS steps,
       (SELECT coalesce(jsonb_agg(jsonb_build_object('id', c.id::text, 'task', c.task, 'status', c.status, 'parent_step', c.parent_step)
               ORDER BY c.id), '[]'::jsonb)
          -- The first children's records (job_parent_idx), a live one's status probed in the queue
          -- by id: not the view, whose join the planner may hash or merge over the whole queue.
          FROM (SELECT r.id, r.task, coalesce((SELECT q.status FROM skiplock.queue q WHERE q.id = r.id), r.status) AS status, r.parent_step
                  FROM (SELECT id, task, status, parent_step FROM skiplock.job_record
                         WHERE parent_id = j.id ORDER BY id LIMIT $2) r) c) AS children
       FROM skiplock.job j WHERE j.id = $1::bigint`,
    [p.id, p.childLimit ?? CHILD_LIMIT],
  );
}

export function mapJobDetail(row: Row): JobDetail {
  const children = (row.children ?? []) as Row[];
  return {
    ...mapJob(row),
    steps: ((row.steps ?? []) as Row[]).map(mapJobStep),
    children: children.map((c): JobChild => ({ id: String(c.id), task: String(c.task), status: c.status as JobStatus, parentStep: String(c.parent_step) })),
  };
}

/** The JSON of GET /v1/jobs/:id: the job's JSON, its steps and its children. */
export function jobDetailToJson(detail: JobDetail) {
  const { steps, children, ...job } = detail;
  return { ...jobToJson(job), steps: steps.map(jobStepToJson), children };
}
