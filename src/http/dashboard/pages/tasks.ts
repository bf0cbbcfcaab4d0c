/** GET /tasks: every task's jobs by status, paused or active, with a Pause / Resume button each. */
import { html } from 'hono/html';
import { JOB_STATUSES } from '../../../core/types.ts';
import type { TaskInfo } from '../../../runtime/operations/index.ts';
import { formatTime, relativeTime, toneBadge, type Html } from '../format.ts';
import { noticeOf } from '../notice.ts';
import type { DashboardDeps, PageRequest, PageResult } from '../respond.ts';

export async function tasksPage(deps: DashboardDeps, { c, csrf, now }: PageRequest): Promise<PageResult> {
  const tasks = await deps.skiplock.listTasks();
  const body = html`<h1>Tasks</h1>
<p class="subtitle">A paused task's jobs are not claimed by any tick (jobs already running finish) and do not keep a Durable Object alarm awake; enqueues are accepted and its schedules keep firing into the queue. Resume and the next tick picks them up.</p>
<section class="card flush">
  ${tasks.length === 0 ? html`<div class="empty">No tasks.</div>` : html`<table class="tasks">
<thead><tr><th>Task</th><th>State</th>${JOB_STATUSES.map((s) => html`<th class="num">${s}</th>`)}<th class="num" title="QUEUED jobs an enqueue with their debounce key still pushes back">Debounced</th><th></th></tr></thead>
<tbody>${tasks.map((task) => row(task, csrf, now))}</tbody></table>`}
</section>`;
  return { title: 'Tasks', section: 'tasks', body, notice: noticeOf(c) };
}

function row(task: TaskInfo, csrf: string, now: number): Html {
  const paused = task.state === 'paused';
  const jobsOf = (status: string) => `/jobs?${new URLSearchParams({ task: task.name, status }).toString()}`;
  return html`<tr class="${paused ? 'row-warn' : ''}" data-task="${task.name}" data-state="${task.state}">
  <td><a href="/jobs?${new URLSearchParams({ task: task.name }).toString()}">${task.name}</a></td>
  <td>${paused ? html`${toneBadge('warn', 'paused')} <span class="muted" title="${task.pausedAt ? formatTime(task.pausedAt) : ''}">${relativeTime(task.pausedAt, now)}</span>` : toneBadge('ok', 'active')}</td>
  ${JOB_STATUSES.map((s) => html`<td class="num">${task.counts[s] > 0 ? html`<a href="${jobsOf(s)}">${task.counts[s]}</a>` : '0'}</td>`)}
  <td class="num">${task.debounced}</td>
  <td class="num"><form class="inline" method="post" action="/tasks/${encodeURIComponent(task.name)}/${paused ? 'resume' : 'pause'}">
    <input type="hidden" name="csrf" value="${csrf}">
    <button type="submit" class="${paused ? 'primary' : 'danger'}">${paused ? 'Resume' : 'Pause'}</button></form></td>
</tr>`;
}
