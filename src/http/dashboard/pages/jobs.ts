/** GET /jobs: jobs newest first, filtered by status and task, a page at a time (keyset cursor). */
import { html } from 'hono/html';
import { JOB_STATUSES, type Job } from '../../../core/types.ts';
import { queueLagTone } from '../attention.ts';
import { formatDuration, relativeTime, statusBadge, truncate, type Html } from '../format.ts';
import { noticeOf } from '../notice.ts';
import type { DashboardDeps, PageRequest, PageResult } from '../respond.ts';
import { bulkLinks } from '../versions.ts';

export const PAGE_SIZE = 50;

export async function jobsPage(deps: DashboardDeps, { c, now }: PageRequest): Promise<PageResult> {
  const statusParam = c.req.query('status');
  const status = JOB_STATUSES.find((s) => s === statusParam?.toUpperCase()); // any case, as the API and the CLI
  const task = c.req.query('task') || undefined;
  const cursor = c.req.query('cursor') || undefined;
  const page = await deps.skiplock.listJobs({ status, task, cursor, limit: PAGE_SIZE });
  const tasks = [...new Set([...deps.skiplock.tasks.keys(), ...(task ? [task] : [])])].sort();
  const filterQuery = (extra: Record<string, string>) =>
    new URLSearchParams({ ...(status ? { status } : {}), ...(task ? { task } : {}), ...extra }).toString();

  const body = html`<h1>Jobs</h1>
<p class="subtitle">Newest first${status || task ? ', filtered' : ''}. Open a job for its payload, result, error and lease.</p>
<section class="card flush">
  <form class="filters" method="get" action="/jobs">
    <label>Status
      <select name="status">
        <option value="">any status</option>
        ${JOB_STATUSES.map((s) => html`<option value="${s}"${s === status ? ' selected' : ''}>${s}</option>`)}
      </select>
    </label>
    <label>Task
      <select name="task">
        <option value="">any task</option>
        ${tasks.map((t) => html`<option value="${t}"${t === task ? ' selected' : ''}>${t}</option>`)}
      </select>
    </label>
    <button type="submit" class="primary">Filter</button>
    ${status || task ? html`<a class="button" href="/jobs">Clear</a>` : ''}
    ${bulkLinks({ status, task })}
  </form>
  ${page.jobs.length === 0 ? html`<div class="empty">No jobs${status || task ? ' match these filters' : ''}.</div>` : jobTable(page.jobs, now)}
  <div class="pager">
    <span>${page.jobs.length} shown${cursor ? ' (older page)' : ''}</span>
    <span>${cursor ? html`<a href="/jobs?${filterQuery({})}">« Newest</a>` : ''}
      ${page.nextCursor ? html` <a href="/jobs?${filterQuery({ cursor: page.nextCursor })}" rel="next">Older »</a>` : ''}</span>
  </div>
</section>`;
  return { title: 'Jobs', section: 'jobs', body, notice: noticeOf(c) };
}

function jobTable(jobs: readonly Job[], now: number): Html {
  return html`<table class="jobs">
<thead><tr><th>ID</th><th>Task</th><th>Status</th><th class="num">Attempts</th><th>Run at</th><th>Finished</th><th>Last error</th></tr></thead>
<tbody>${jobs.map((job) => {
    const waited = job.status === 'QUEUED' ? now - job.runAt.getTime() : 0;
    const lag = queueLagTone(waited);
    return html`<tr class="${job.status === 'DEAD' || lag === 'bad' ? 'row-bad' : lag === 'warn' || isRetrying(job) ? 'row-warn' : ''}" data-status="${job.status}">
  <td class="mono"><a href="/jobs/${job.id}">#${job.id}</a></td>
  <td>${job.task}${job.scheduleName ? html`<span class="tag" title="fired by schedule ${job.scheduleName}">cron</span>` : ''}</td>
  <td>${statusBadge(job.status, job.cancelRequested ? 'cancelling' : isRetrying(job) ? 'retrying' : undefined)}</td>
  <td class="num">${job.attempts}/${job.maxAttempts}</td>
  <td>${relativeTime(job.runAt, now)}${lag === 'ok' ? '' : html` <span class="badge tone-${lag}">waiting ${formatDuration(waited)}</span>`}</td>
  <td>${job.finishedAt ? relativeTime(job.finishedAt, now) : html`<span class="muted">—</span>`}</td>
  <td class="error">${job.lastError ? truncate(job.lastError, 90) : ''}</td>
</tr>`;
  })}</tbody></table>`;
}

/** QUEUED again after a failed attempt (not after a person's retry, which resets attempts). */
export function isRetrying(job: Job): boolean {
  return job.status === 'QUEUED' && job.attempts > 0 && job.lastError !== null;
}
