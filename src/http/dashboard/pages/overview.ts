/** GET /: counts by status and task, the queue's lag, the last hour as a chart, and what needs attention. */
import { html } from 'hono/html';
import { JOB_STATUSES, type JobStatus } from '../../../core/types.ts';
import type { JobStats } from '../../../runtime/operations/index.ts';
import type { FairnessStatus, FlowStatus } from '../../../runtime/flow/index.ts';
import { countUnclaimableJobs } from '../../../store/dashboard.ts';
import { SCHEDULE_LIST_LIMIT, type ScheduleInfo } from '../../../runtime/schedules/index.ts';
import { queueLagTone, scheduleHealth, type Tone } from '../attention.ts';
import { activityChart } from '../chart.ts';
import { formatDuration, plural, type Html } from '../format.ts';
import type { DashboardDeps, PageRequest, PageResult } from '../respond.ts';

export async function overviewPage(deps: DashboardDeps, { now }: PageRequest): Promise<PageResult> {
  const { skiplock } = deps;
  // The alerts look at the first SCHEDULE_LIST_LIMIT.max schedules by name.
  const [stats, activity, { schedules, nextCursor }, unclaimable, flow, fairness] = await Promise.all([
    skiplock.stats(),
    skiplock.activity(60),
    skiplock.listSchedules({ limit: SCHEDULE_LIST_LIMIT.max }),
    unclaimableJobs(deps),
    skiplock.flowStatus(),
    skiplock.fairnessStatus(),
  ]);
  const body = html`<h1>Overview</h1>
<p class="subtitle">${stats.doneCount === 'estimated' ? 'about ' : ''}${plural(total(stats.counts), 'job')} in the table · ${plural(schedules.length, 'schedule')}${nextCursor ? ' (the first by name; there are more)' : ''}</p>
${alerts(stats, schedules, now, unclaimable, skiplock.tickTotals().lastTickMsAgo)}
${statCards(stats)}
<section class="card"><h2>Finished and failed, last 60 minutes</h2>${activityChart(activity)}</section>
${taskTable(stats)}
${flowSection(flow)}
${fairSection(fairness)}`;
  return { title: 'Overview', section: 'overview', body };
}

interface Unclaimable {
  count: number;
  maxTimeoutMs: number;
}

/** QUEUED jobs whose timeout no tick here can fit; undefined when the app was not told its budget. */
async function unclaimableJobs({ skiplock, maxJobTimeoutMs }: DashboardDeps): Promise<Unclaimable | undefined> {
  if (maxJobTimeoutMs === undefined) return undefined;
  const [row] = await skiplock.sql.query(countUnclaimableJobs({ tasks: [...skiplock.tasks.keys()], maxTimeoutMs: maxJobTimeoutMs }));
  return { count: Number(row?.n ?? 0), maxTimeoutMs: maxJobTimeoutMs };
}

function total(counts: Record<JobStatus, number>): number {
  return JOB_STATUSES.reduce((sum, status) => sum + counts[status], 0);
}

/**
 * Due jobs wait and none runs: nothing is ticking right now. What is known of the last tick: this
 * instance's own (in memory); nothing records the others' (a Worker's alarm or cron runs elsewhere).
 */
function waitingForTick(stats: JobStats): boolean {
  return stats.oldestQueuedAgeMs > 0 && stats.counts.RUNNING === 0;
}

function lastTickText(lastTickMsAgo: number | null): string {
  return lastTickMsAgo === null
    ? 'No tick has run in this instance since it started (ticks may run in another one: an alarm, a cron, another process; nothing records them in the database).'
    : `This instance last ticked ${formatDuration(lastTickMsAgo)} ago.`;
}

/** The banner: one line per problem, or a single green line when there is none. */
function alerts(stats: JobStats, schedules: readonly ScheduleInfo[], now: number, unclaimable: Unclaimable | undefined, lastTickMsAgo: number | null): Html {
  const items: { tone: Tone; title: string; href: string; text: string }[] = [];
  if (unclaimable && unclaimable.count > 0)
    items.push({
      tone: 'bad',
      title: `${plural(unclaimable.count, 'job')} can never be claimed here`,
      href: '/jobs?status=QUEUED',
      text: `their timeoutMs is over ${formatDuration(unclaimable.maxTimeoutMs)}, the longest a tick of this deployment can give a job: cancel them, or enqueue them again with a shorter timeout.`,
    });
  const stranded = stats.unrunnable ?? [];
  if (stranded.length > 0) {
    const n = stranded.reduce((sum, u) => sum + u.queued + u.waiting, 0);
    items.push({
      tone: 'warn',
      title: `${plural(n, 'job')} nothing here can run`,
      href: `/jobs?status=QUEUED&task=${encodeURIComponent(stranded[0]!.task)}`,
      text: `of ${stranded.length === 1 ? 'task' : 'tasks'} ${stranded.map((u) => u.task).join(', ')}, which this deployment does not register (renamed, removed, or another service's): deploy the task again, or cancel them (Jobs, filtered by task: "cancel all").`,
    });
  }
  if (stats.counts.DEAD > 0)
    items.push({ tone: 'bad', title: plural(stats.counts.DEAD, 'dead job'), href: '/dead', text: 'failed for good and wait for a person to review and retry them.' });
  const lagTone = queueLagTone(stats.oldestQueuedAgeMs);
  if (lagTone !== 'ok')
    items.push({
      tone: lagTone,
      title: 'Queue is falling behind',
      href: '/jobs?status=QUEUED',
      text: `the oldest due job has waited ${formatDuration(stats.oldestQueuedAgeMs)}: are ticks running, and is its task deployed? ${lastTickText(lastTickMsAgo)}`,
    });
  else if (waitingForTick(stats))
    items.push({
      tone: 'warn',
      title: 'Due jobs are waiting',
      href: '/jobs?status=QUEUED',
      text: `the oldest for ${formatDuration(stats.oldestQueuedAgeMs)}, and no job is running: they start at the next tick (an enqueue's own, the Durable Object's alarm, the minute cron, the Node runner's timer). ${lastTickText(lastTickMsAgo)} If they keep waiting: is anything ticking, and is their task deployed here and not paused?`,
    });
  for (const schedule of schedules) {
    const health = scheduleHealth(schedule, now);
    if (health.reason) items.push({ tone: health.tone, title: `Schedule ${schedule.name}`, href: '/schedules', text: health.reason });
  }
  if (items.length === 0) return html`<ul class="alerts"><li class="ok"><strong>All clear</strong> no dead jobs, the queue keeps up, and every schedule fires on time.</li></ul>`;
  return html`<ul class="alerts">${items.map((item) => html`<li class="${item.tone}"><a href="${item.href}"><strong>${item.title}</strong></a> <span>${item.text}</span></li>`)}</ul>`;
}

function statCards(stats: JobStats): Html {
  const card = (status: JobStatus, hint: string) => {
    const alert = status === 'DEAD' && stats.counts.DEAD > 0 ? ' alert-bad' : '';
    const href = status === 'DEAD' ? '/dead' : `/jobs?status=${status}`;
    return html`<a class="stat ${status.toLowerCase()}${alert}" href="${href}">
  <div class="label">${status.toLowerCase()}</div><div class="value">${stats.counts[status].toLocaleString('en-US')}</div><div class="hint">${hint}</div></a>`;
  };
  const lag = queueLagTone(stats.oldestQueuedAgeMs);
  return html`<div class="stats">
  ${card('QUEUED', 'waiting or scheduled')}
  ${card('RUNNING', 'holding a lease')}
  ${card('WAITING', 'for their children')}
  ${card('DONE', 'kept until retention')}
  ${card('DEAD', stats.counts.DEAD > 0 ? 'needs review' : 'none: good')}
  ${card('CANCELLED', 'by a person')}
  <a class="stat lag alert-${lag}" href="/jobs?status=QUEUED">
    <div class="label">oldest queued</div>
    <div class="value">${stats.oldestQueuedAgeMs === 0 ? '0 s' : formatDuration(stats.oldestQueuedAgeMs)}</div>
    <div class="hint">${lag !== 'ok' ? (lag === 'warn' ? 'falling behind' : 'stuck?') : waitingForTick(stats) ? 'waiting for a tick' : 'keeping up'}</div></a>
</div>`;
}

function taskTable(stats: JobStats): Html {
  const tasks = Object.entries(stats.byTask).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  const cell = (task: string, status: JobStatus, n: number) => {
    if (n === 0) return html`<td class="num zero">0</td>`;
    const link = html`<a href="/jobs?${new URLSearchParams({ status, task }).toString()}">${n.toLocaleString('en-US')}</a>`;
    return html`<td class="num">${status === 'DEAD' ? html`<span class="badge status-dead">${link}</span>` : link}</td>`;
  };
  return html`<section class="card flush"><h2>By task</h2>
${tasks.length === 0
    ? html`<div class="empty">No jobs yet.</div>`
    : html`<table><thead><tr><th>Task</th>${JOB_STATUSES.map((s) => html`<th class="num">${s.toLowerCase()}</th>`)}<th class="num">total</th></tr></thead>
<tbody>${tasks.map(([task, counts]) => html`<tr class="${counts.DEAD > 0 ? 'row-bad' : ''}"><td><a href="/jobs?${new URLSearchParams({ task }).toString()}">${task}</a></td>${JOB_STATUSES.map((s) => cell(task, s, counts[s]))}<td class="num">${total(counts).toLocaleString('en-US')}</td></tr>`)}</tbody></table>`}
</section>`;
}

/** Tasks with concurrency or rate limits: jobs held back, and the keys at their limit. Nothing when no task has one. */
function flowSection(flow: FlowStatus): Html | string {
  const tasks = Object.entries(flow.byTask).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  if (tasks.length === 0) return '';
  const limitText = (k: FlowStatus['keysAtLimit'][number]) =>
    k.kind === 'rate' ? `${k.inUse} of ${k.limit} starts in the window${k.opensAt ? `, next at ${k.opensAt.toISOString()}` : ''}` : `${k.inUse} of ${k.limit} running`;
  return html`<section class="card flush"><h2>Flow control</h2>
<table><thead><tr><th>Task</th><th class="num">waiting on a limit</th><th class="num">keys at concurrency limit</th><th class="num">at global limit</th><th class="num">keys at rate limit</th></tr></thead>
<tbody>${tasks.map(([task, t]) => html`<tr class="${t.waiting > 0 ? 'row-warn' : ''}"><td><a href="/jobs?${new URLSearchParams({ task, status: 'QUEUED' }).toString()}">${task}</a></td><td class="num">${t.waiting.toLocaleString('en-US')}</td><td class="num">${t.keysAtLimit.concurrency}</td><td class="num">${t.keysAtLimit.global > 0 ? 'yes' : 'no'}</td><td class="num">${t.keysAtLimit.rate}</td></tr>`)}</tbody></table>
${flow.keysAtLimit.length === 0
    ? html`<div class="empty">No key is at its limit.</div>`
    : html`<table><thead><tr><th>Task</th><th>Limit</th><th>Key</th><th>In use</th><th class="num">waiting</th></tr></thead>
<tbody>${flow.keysAtLimit.map((k) => html`<tr><td>${k.task}</td><td>${k.kind}</td><td class="mono">${k.key === '' ? html`<span class="muted">(no key)</span>` : k.key}</td><td>${limitText(k)}</td><td class="num">${k.waiting.toLocaleString('en-US')}</td></tr>`)}</tbody></table>`}
</section>`;
}

/** Fair share (docs/flow-control.md): per level the lanes taking turns and the next claim's start, then the keys with the most due jobs. Nothing when no fair job is due. */
function fairSection(fair: FairnessStatus): Html | string {
  if (fair.levels.length === 0) return '';
  const lane = (l: FairnessStatus['levels'][number]) =>
    l.cursor === undefined ? html`<span class="muted">(no claim yet)</span>` : l.cursor === null ? html`<span class="muted">the jobs without a key</span>` : html`<span class="mono">${l.cursor}</span>`;
  return html`<section class="card flush"><h2>Fair share</h2>
<table><thead><tr><th class="num">Priority</th><th class="num">lanes taking turns</th><th class="num">due jobs with a key</th><th>last claim stopped after</th></tr></thead>
<tbody>${fair.levels.map((l) => html`<tr><td class="num">${l.priority}</td><td class="num">${l.lanes.toLocaleString('en-US')}</td><td class="num">${l.due.toLocaleString('en-US')}</td><td>${lane(l)}</td></tr>`)}</tbody></table>
<table><thead><tr><th>Key</th><th class="num">Priority</th><th class="num">due</th><th>oldest due since</th><th class="num">running</th></tr></thead>
<tbody>${fair.keys.map((k) => html`<tr><td class="mono">${k.key}</td><td class="num">${k.priority}</td><td class="num">${k.due.toLocaleString('en-US')}</td><td>${k.oldestDueAt.toISOString()}</td><td class="num">${k.running}</td></tr>`)}</tbody></table>
</section>`;
}
