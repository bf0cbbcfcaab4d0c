/** GET /events: stored events, newest first (docs/steps.md, "Events"): what each woke, started and cancelled. */
import { html } from 'hono/html';
import { listEventsWith } from '../../../runtime/events/index.ts';
import type { StoredEvent } from '../../../runtime/events/index.ts';
import { formatTime, relativeTime, truncate, type Html } from '../format.ts';
import { noticeOf } from '../notice.ts';
import type { DashboardDeps, PageRequest, PageResult } from '../respond.ts';

const PAGE = 50;

export async function eventsPage(deps: DashboardDeps, { c, now }: PageRequest): Promise<PageResult> {
  const name = c.req.query('name') || undefined;
  const cursor = c.req.query('cursor') || undefined;
  const page = await listEventsWith(deps.skiplock.sql, { name, cursor, limit: PAGE });
  const next = page.nextCursor ? `/events?${new URLSearchParams({ ...(name && { name }), cursor: page.nextCursor }).toString()}` : null;
  const body = html`<h1>Events${name ? html` <code>${name}</code>` : ''}</h1>
<p class="subtitle">Each event woke the jobs waiting for it (ctx.waitForEvent), started the jobs of the tasks defined with <code>on:</code> its name (those of another deployment's tasks are pending until that deployment's next tick), and cancelled those whose cancelOn it matched. Kept for the retention window (7 days by default).</p>
<section class="card flush">
  ${page.events.length === 0 ? html`<div class="empty">No events.</div>` : html`<table class="events">
<thead><tr><th class="num">#</th><th>Name</th><th>Key</th><th>Data</th><th class="num">Woken</th><th class="num">Started</th><th class="num">Cancelled</th><th>Refused</th><th>Sent</th></tr></thead>
<tbody>${page.events.map((e) => row(e, now))}</tbody></table>`}
</section>
${next ? html`<p><a href="${next}">Older →</a></p>` : ''}`;
  return { title: 'Events', section: 'events', body, notice: noticeOf(c) };
}

function row(e: StoredEvent, now: number): Html {
  return html`<tr data-event="${e.id}">
  <td class="num">${e.id}</td>
  <td><a href="/events?${new URLSearchParams({ name: e.name }).toString()}">${e.name}</a></td>
  <td>${e.key === null ? html`<span class="muted">none</span>` : html`<code>${e.key}</code>`}</td>
  <td><code>${truncate(JSON.stringify(e.data) ?? 'null', 80)}</code></td>
  <td class="num">${e.woken}</td>
  <td class="num">${e.started}${e.pending > 0 ? html` <span class="muted" title="on: jobs the deployment that defines their task starts at its next tick">+${e.pending} pending</span>` : ''}</td>
  <td class="num">${e.cancelled}</td>
  <td>${e.refused.length === 0 ? '' : e.refused.map((r, i) => html`${i > 0 ? html`<br>` : ''}<code>${r.task}</code>: ${truncate(r.message, 120)}`)}</td>
  <td title="${formatTime(e.createdAt)}">${relativeTime(e.createdAt, now)}</td>
</tr>`;
}
