/** GET /schedules: every schedule with its timing, next and last firing, and its last run's status; 100 a page, by name. */
import { html } from 'hono/html';
import type { ScheduleInfo } from '../../../runtime/schedules/index.ts';
import { scheduleHealth } from '../attention.ts';
import { formatDuration, relativeTime, statusBadge, toneBadge, type Html } from '../format.ts';
import type { DashboardDeps, PageRequest, PageResult } from '../respond.ts';

export async function schedulesPage(deps: DashboardDeps, { c, now }: PageRequest): Promise<PageResult> {
  const cursor = c.req.query('cursor') || undefined;
  const prefix = c.req.query('prefix') || undefined;
  const { schedules, nextCursor } = await deps.skiplock.listSchedules({ cursor, prefix });
  const query = (extra: Record<string, string>) => new URLSearchParams({ ...(prefix ? { prefix } : {}), ...extra }).toString();
  const body = html`<h1>Schedules</h1>
<p class="subtitle">Static schedules come from code (createSkiplock), dynamic ones from <code>PUT /v1/schedules/:name</code>. A schedule is <em>silent</em> when its next run is over 3 minutes overdue: nothing is ticking.</p>
<section class="card flush">
  <form class="filters" method="get" action="/schedules">
    <label>Name starts with <input type="text" name="prefix" value="${prefix ?? ''}" placeholder="tenant-42-" maxlength="200"></label>
    <button type="submit" class="primary">Filter</button>
    ${prefix ? html`<a class="button" href="/schedules">Clear</a>` : ''}
  </form>
${schedules.length === 0
    ? html`<div class="empty">No schedules${prefix ? ' with names that start with this' : ''}.</div>`
    : html`<table class="schedules">
<thead><tr><th>Schedule</th><th>When</th><th>Task</th><th>Next run</th><th>Last fired</th><th>Last run</th><th>Health</th></tr></thead>
<tbody>${schedules.map((s) => scheduleRow(s, now))}</tbody></table>`}
${nextCursor || cursor
    ? html`<div class="pager"><span>${schedules.length} shown</span><span>${cursor ? html`<a href="/schedules${prefix ? `?${query({})}` : ''}">« First</a>` : ''}
      ${nextCursor ? html` <a href="/schedules?${query({ cursor: nextCursor })}" rel="next">More »</a>` : ''}</span></div>`
    : ''}
</section>`;
  return { title: 'Schedules', section: 'schedules', body };
}

function scheduleRow(s: ScheduleInfo, now: number): Html {
  const health = scheduleHealth(s, now);
  return html`<tr class="${health.tone === 'bad' ? 'row-bad' : health.tone === 'warn' ? 'row-warn' : ''}" data-schedule="${s.name}">
  <td><strong>${s.name}</strong><span class="tag">${s.source}</span></td>
  <td class="mono">${timing(s)}</td>
  <td><a href="/jobs?${new URLSearchParams({ task: s.task }).toString()}">${s.task}</a></td>
  <td>${nextRun(s, health.overdue === true, now)}</td>
  <td>${s.lastFiredAt ? relativeTime(s.lastFiredAt, now) : html`<span class="muted">never</span>`}</td>
  <td>${s.lastStatus && s.lastJobId ? html`<a href="/jobs/${s.lastJobId}">${statusBadge(s.lastStatus)}</a>` : s.lastJobId ? html`<span class="muted">job deleted</span>` : html`<span class="muted">—</span>`}</td>
  <td>${toneBadge(health.tone, health.label)}</td>
</tr>`;
}

function nextRun(s: ScheduleInfo, overdue: boolean, now: number): Html {
  if (!s.enabled) return html`<span class="muted">disabled</span>`;
  if (overdue && s.nextRunAt) return html`<span class="overdue">${formatDuration(now - s.nextRunAt.getTime())} overdue</span>`;
  if (s.nextRunAt && s.nextRunAt.getTime() <= now) return html`due now`;
  return relativeTime(s.nextRunAt, now);
}

function timing(s: ScheduleInfo): string {
  const tz = s.tz === 'UTC' ? '' : ` (${s.tz})`;
  if (s.cron !== null) return `${s.cron}${tz}`;
  if (s.every !== null) return `every ${formatDuration(s.every)}`;
  if (s.daily !== null) return `daily at ${s.daily.join(', ')}${tz}`;
  return '';
}
