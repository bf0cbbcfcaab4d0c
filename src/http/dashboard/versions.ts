/**
 * The dashboard's versions and bulk actions (issue 25): restart a job from a step (its page), and
 * "retry / cancel all N matching" on the jobs list, through a confirmation page that shows the
 * count before anything is written.
 *
 *   POST /jobs/:id/restart   from_step: the step to restart from ('' = from the top)
 *   GET  /jobs/bulk          ?action=retry|cancel&status=&task=: the confirmation, with the count
 *   POST /jobs/bulk          the same fields: skiplock.bulk, then back to the filtered list
 */
import type { Context, Handler } from 'hono';
import { html } from 'hono/html';
import { SkiplockError } from '../../core/errors.ts';
import { RESTARTABLE_STATUSES } from '../../core/state.ts';
import { JOB_STATUSES, type JobDetail, type JobStatus } from '../../core/types.ts';
import { plural, type Html } from './format.ts';
import { action, withQuery, type DashboardDeps, type PageRequest, type PageResult } from './respond.ts';


/** On a job's page: restart from a step (a select of its recorded steps), for the states a restart takes. */
export function restartForm(job: JobDetail, csrf: string): Html {
  if (!RESTARTABLE_STATUSES.includes(job.status) || job.steps.length === 0) return html``;
  return html`<section class="card"><h2>Restart from a step</h2>
<p class="muted">Keeps the steps recorded before the one chosen, forgets it and the rest (children of forgotten invokes are cancelled), and queues the job with fresh attempts: the way out after a deploy changed its steps (docs/steps.md, "Changing a workflow's code").</p>
<form class="inline" method="post" action="/jobs/${job.id}/restart">
  <input type="hidden" name="csrf" value="${csrf}">
  <label>From <select name="from_step">${job.steps.map((s) => html`<option value="${s.id}">${s.seq + 1}. ${s.id} (${s.kind})</option>`)}<option value="">the top (forget every step)</option></select></label>
  <button type="submit" class="danger">Restart</button>
</form></section>`;
}

export function restart(deps: DashboardDeps): Handler {
  return action(deps, async (c, form) => {
    const id = c.req.param('id') ?? '';
    let notice: 'restarted' | 'conflict' | 'not-found' = 'restarted';
    try {
      await deps.skiplock.restartJob(id, { fromStep: form.from_step ? form.from_step : null });
      deps.startWork(c);
    } catch (error) {
      if (!(error instanceof SkiplockError) || (error.code !== 'conflict' && error.code !== 'not_found' && error.code !== 'invalid_request')) throw error;
      notice = error.code === 'conflict' ? 'conflict' : 'not-found';
    }
    return c.redirect(withQuery(`/jobs/${encodeURIComponent(id)}`, { notice, job: id }), 303);
  });
}

interface Filter {
  action: 'retry' | 'cancel';
  status?: JobStatus;
  task?: string;
}

function filterOf(read: (name: string) => string | undefined): Filter | undefined {
  const what = read('action');
  if (what !== 'retry' && what !== 'cancel') return undefined;
  const status = JOB_STATUSES.find((s) => s === read('status')?.toUpperCase());
  const task = read('task') || undefined;
  if (!status && !task) return undefined;
  return { action: what, ...(status ? { status } : {}), ...(task ? { task } : {}) };
}

const query = (f: Omit<Filter, 'action'>) => ({ ...(f.status ? { status: f.status } : {}), ...(f.task ? { task: f.task } : {}) });

/** On the filtered jobs list: links to the confirmation of each bulk action (no count here: the confirmation counts). */
export function bulkLinks(filter: { status?: JobStatus | undefined; task?: string | undefined }): Html {
  if (!filter.status && !filter.task) return html``;
  const f = { ...(filter.status ? { status: filter.status } : {}), ...(filter.task ? { task: filter.task } : {}) };
  return html`<span class="bulk-actions"><a class="button" href="${withQuery('/jobs/bulk', { action: 'retry', ...query(f) })}">Retry all matching…</a>
  <a class="button" href="${withQuery('/jobs/bulk', { action: 'cancel', ...query(f) })}">Cancel all matching…</a></span>`;
}

/** GET /jobs/bulk: what the action would do, counted now (a dry run), and the button that does it. */
export async function bulkConfirmPage(deps: DashboardDeps, { c, csrf }: PageRequest): Promise<PageResult> {
  const filter = filterOf((name) => c.req.query(name));
  if (!filter) throw new SkiplockError('invalid_request', 'A bulk action needs retry or cancel, and a status or a task to filter by.');
  const { action: what, ...where } = filter;
  const { matched, wouldChange: changed = 0 } = await deps.skiplock.bulk({ action: what, where, dryRun: true });
  const described = [where.status ? `status ${where.status}` : '', where.task ? `task ${where.task}` : ''].filter(Boolean).join(', ');
  const verb = what === 'retry' ? 'Retry' : 'Cancel';
  const body = html`<h1>${verb} all matching jobs?</h1>
<section class="card">
  <p>${plural(matched, 'job')} match ${described}; ${plural(changed, 'job')} of them can be ${what === 'retry' ? 'retried (DEAD or CANCELLED)' : 'cancelled (QUEUED or WAITING; RUNNING ones are asked to stop)'} now.</p>
  <form class="inline" method="post" action="/jobs/bulk">
    <input type="hidden" name="csrf" value="${csrf}"><input type="hidden" name="action" value="${what}">
    ${where.status ? html`<input type="hidden" name="status" value="${where.status}">` : ''}${where.task ? html`<input type="hidden" name="task" value="${where.task}">` : ''}
    <button type="submit" class="${what === 'cancel' ? 'danger' : 'primary'}"${changed === 0 ? ' disabled' : ''}>${verb} ${plural(changed, 'job')}</button>
  </form>
  <a class="button" href="${withQuery('/jobs', query(where))}">Back</a>
</section>`;
  return { title: `${verb} all matching`, section: 'jobs', body };
}

/** POST /jobs/bulk: the action, then the filtered list with how many changed. */
export function bulkAction(deps: DashboardDeps): Handler {
  return action(deps, async (c: Context, form) => {
    const filter = filterOf((name) => form[name]);
    if (!filter) return c.redirect('/jobs', 303);
    const { action: what, ...where } = filter;
    const { changed } = await deps.skiplock.bulk({ action: what, where });
    if (what === 'retry' && changed > 0) deps.startWork(c);
    return c.redirect(withQuery('/jobs', { ...query(where), notice: what === 'retry' ? 'bulk-retried' : 'bulk-cancelled', count: String(changed) }), 303);
  });
}
