/**
 * GET /dead: the DEAD jobs, newest first, each with its error and a Retry button. There is no
 * Cancel here: the state machine (src/core/state.ts) lets a DEAD job go only back to QUEUED.
 */
import { html } from 'hono/html';
import type { Job } from '../../../core/types.ts';
import { RETRY_DEAD_LIMIT } from '../../../runtime/operations/index.ts';
import { formatTime, relativeTime, truncate, type Html } from '../format.ts';
import { noticeOf } from '../notice.ts';
import type { DashboardDeps, PageRequest, PageResult } from '../respond.ts';
import { jobActions } from './job.ts';
import { PAGE_SIZE } from './jobs.ts';

export async function deadPage(deps: DashboardDeps, { c, csrf, now }: PageRequest): Promise<PageResult> {
  const task = c.req.query('task') || undefined;
  const cursor = c.req.query('cursor') || undefined;
  const [page, deadTasks] = await Promise.all([deps.skiplock.listJobs({ status: 'DEAD', task, cursor, limit: PAGE_SIZE }), deps.skiplock.deadByTask()]);
  const allDead = deadTasks.reduce((sum, t) => sum + t.dead, 0);
  const here = `/dead${task ? `?${new URLSearchParams({ task }).toString()}` : ''}`;

  const body = html`<h1>Dead letter</h1>
<p class="subtitle">Jobs that failed permanently or ran out of attempts. Retry puts one back in the queue, due now, with fresh attempts (its last error is kept). A DEAD job cannot be cancelled; it stays here until retried or removed by retention.</p>
<section class="card flush">
  <div class="chips">
    <a href="/dead"${task ? '' : html` class="active"`}>all tasks · ${allDead}</a>
    ${deadTasks.map(({ task: name, dead }) => html`<a href="/dead?${new URLSearchParams({ task: name }).toString()}"${name === task ? html` class="active"` : ''}>${name} · ${dead}</a>`)}
  </div>
  ${page.jobs.length === 0 ? html`<div class="empty">No dead jobs${task ? ' for this task' : ''}. Nothing to review.</div>` : html`${retryAll(task ? (deadTasks.find((t) => t.task === task)?.dead ?? 0) : allDead, task, csrf)}${deadTable(page.jobs, csrf, here, now)}`}
  ${page.nextCursor || cursor
    ? html`<div class="pager"><span>${page.jobs.length} shown</span><span>${cursor ? html`<a href="${here}">« Newest</a>` : ''}
      ${page.nextCursor ? html` <a href="/dead?${new URLSearchParams({ ...(task ? { task } : {}), cursor: page.nextCursor }).toString()}" rel="next">Older »</a>` : ''}</span></div>`
    : ''}
</section>`;
  return { title: 'Dead letter', section: 'dead', body, notice: noticeOf(c) };
}

/** Once the bug is fixed: every dead job of the task shown (or of all), back to the queue; 1000 a press. */
function retryAll(count: number, task: string | undefined, csrf: string): Html {
  const what = count > RETRY_DEAD_LIMIT ? `the oldest ${RETRY_DEAD_LIMIT.toLocaleString('en-US')}` : count === 1 ? 'the dead job' : `all ${count.toLocaleString('en-US')}`;
  return html`<form class="filters" method="post" action="/dead/retry">
  <input type="hidden" name="csrf" value="${csrf}">${task ? html`<input type="hidden" name="task" value="${task}">` : ''}
  <button type="submit" class="primary">Retry ${what}${task ? html` of ${task}` : ''}</button>
  <span class="muted">Fixed the cause? They go back to the queue, due now, with fresh attempts.</span>
</form>`;
}

function deadTable(jobs: readonly Job[], csrf: string, returnTo: string, now: number): Html {
  return html`<table class="dead">
<thead><tr><th>ID</th><th>Task</th><th>Died</th><th class="num">Attempts</th><th>Last error</th><th></th></tr></thead>
<tbody>${jobs.map((job) => html`<tr class="row-bad" data-status="${job.status}">
  <td class="mono"><a href="/jobs/${job.id}">#${job.id}</a></td>
  <td>${job.task}</td>
  <td title="${job.finishedAt ? formatTime(job.finishedAt) : ''}">${relativeTime(job.finishedAt, now)}</td>
  <td class="num">${job.attempts}/${job.maxAttempts}</td>
  <td class="error">${job.lastError ? truncate(job.lastError, 140) : html`<span class="muted">no error recorded</span>`}</td>
  <td class="num">${jobActions(job, csrf, returnTo, true)}</td>
</tr>`)}</tbody></table>`;
}
