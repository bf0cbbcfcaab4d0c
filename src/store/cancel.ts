/**
 * A cancel, as CTEs: of the live jobs a CTE selects (their ids), QUEUED and WAITING ones end
 * CANCELLED (their queue row deleted, their record written), RUNNING ones are asked to stop
 * (cancel_requested: the worker sees it at its next heartbeat, the reaper honours it). Nobody
 * waits for their children any more (pending_children 0). Used by a person's cancel
 * (src/store/admin.ts), the bulk cancel and an event's cancelOn (src/store/events.ts).
 *
 * Time: `$1` is always the clock (src/store/clock.ts).
 */
import { NOW } from './clock.ts';
import { recordEnd } from './queue.ts';

/**
 * CTEs `${name}_asked`, `${name}_gone`, `${name}_ended` and `${name}`: the last answers per job
 * changed its id, new status, result (null), last_error, parent_id and parent_step, as the
 * fan-in reads them (src/store/steps.ts fanInCtes). `ids` is SQL selecting the ids; `error`, SQL
 * giving the last_error of a job that ends here (default: the one it has).
 */
export function cancelCtes(name: string, ids: string, error?: string): string {
  return `${name}_asked AS (
       UPDATE skiplock.queue j SET cancel_requested = true, pending_children = 0, updated_at = ${NOW}
        WHERE j.id = ANY (ARRAY(${ids})) AND j.status = 'RUNNING'
       RETURNING j.id, j.parent_id, j.last_error
     ),
     ${name}_gone AS (
       DELETE FROM skiplock.queue j WHERE j.id = ANY (ARRAY(${ids})) AND j.status IN ('QUEUED', 'WAITING')
       RETURNING j.*
     ),
     ${name}_ended AS (
       ${recordEnd(`${name}_gone`, {
         status: `'CANCELLED'`, finished_at: NOW, pending_children: '0', ...(error === undefined ? {} : { last_error: error }),
       }, 'r.id, r.last_error, r.parent_id, r.parent_step')}
     ),
     ${name} AS (
       SELECT id, 'CANCELLED'::text AS status, NULL::jsonb AS result, last_error, parent_id, parent_step FROM ${name}_ended
       UNION ALL
       SELECT a.id, 'RUNNING', NULL::jsonb, a.last_error, a.parent_id, NULL FROM ${name}_asked a
     )`;
}

/**
 * The cascade of a cancel (or of a restart's forgotten invokes: src/store/restart.ts), for a WITH
 * RECURSIVE: the jobs of `firstLevel` (SQL selecting ids) and their descendants (by the record's
 * job_parent_idx) that are still live end CANCELLED or are asked to stop (`descendants`, as
 * cancelCtes), and the invoke steps of `stepsOf` that still wait are marked failed with `error`
 * (SQL text). `skip` (SQL selecting ids) are left alone: jobs the same statement changes otherwise
 * (a statement changes a row once).
 */
export function descendantsCtes(p: { firstLevel: string; stepsOf: string; error: string; skip?: string }): string {
  return `tree(id) AS (
       ${p.firstLevel}
       UNION
       SELECT c.id FROM skiplock.job_record c JOIN tree t ON c.parent_id = t.id WHERE c.parent_id IS NOT NULL
     ),
     ${cancelCtes('descendants', `SELECT id FROM tree${p.skip ? ` WHERE id NOT IN (${p.skip})` : ''}`)},
     orphaned_steps AS (
       UPDATE skiplock.job_step s SET status = 'failed', child_status = 'CANCELLED', finished_at = ${NOW},
              error = ${p.error}
        WHERE s.kind = 'invoke' AND s.status = 'waiting' AND s.job_id IN (${p.stepsOf})
     )`;
}
