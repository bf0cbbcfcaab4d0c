/** GET /jobs/:id: one job's payload, result, attempts, last error, timings and lease, with its actions. */
import { html } from 'hono/html';
import { SkiplockError } from '../../../core/errors.ts';
import type { Job, JobDetail } from '../../../core/types.ts';
import { formatDuration, formatTime, jsonBlock, relativeTime, statusBadge, type Html } from '../format.ts';
import { noticeOf } from '../notice.ts';
import { describeFlowWait, type FlowWait } from '../../../runtime/flow/index.ts';
import { isRetrying } from './jobs.ts';
import { attemptTimeline, observabilityFacts } from './job-timeline.ts';
import { childrenSection, currentEventWait, currentSleep, eventWaitReason, parentFact, sleepingReason, stepsSection, waitingForChildren } from './job-steps.ts';
import { jobWaitFacts } from '../../../store/admin.ts';
import { toBool } from '../../../store/rows.ts';
import type { DashboardDeps, PageRequest, PageResult } from '../respond.ts';
import { restartForm } from '../versions.ts';
import { streamsSection } from './job-streams.ts';
import { batchFacts } from './job-batch.ts';

export async function jobPage(deps: DashboardDeps, { c, csrf, now }: PageRequest): Promise<PageResult> {
  const id = c.req.param('id') ?? '';
  // The job with its steps and children, in one statement (the read path of GET /v1/jobs/:id too).
  const job = await deps.skiplock.getJobDetail(id);
  if (!job) throw new SkiplockError('not_found', `There is no job ${JSON.stringify(id)}.`);
  const [facts] = job.status === 'QUEUED' ? await deps.skiplock.sql.query(jobWaitFacts({ id: job.id })) : [];
  const flow = job.status === 'QUEUED' ? await deps.skiplock.flowWait(job.id) : null;
  const streams = await streamsSection(deps, job);
  const batch = await batchFacts(deps, job);

  const body = html`<div class="title-row">
  <h1>Job #${job.id}</h1>
  ${statusBadge(job.status, job.cancelRequested ? 'cancel requested' : undefined)}
  <div class="actions">${jobActions(job, csrf, `/jobs/${job.id}`, false, now)}</div>
</div>
${job.status === 'QUEUED' ? html`<p class="subtitle" data-waiting>${waitingReason(job, now, facts !== undefined && toBool(facts.task_paused), typeof facts?.debounce_key === 'string' ? facts.debounce_key : null)}</p>` : ''}
${job.status === 'WAITING' ? html`<p class="subtitle" data-waiting>${job.pendingChildren > 0 ? waitingForChildren(job, now) : waitingReason(job, now, false, null)}</p>` : ''}
<p class="subtitle">Task <a href="/jobs?${new URLSearchParams({ task: job.task }).toString()}">${job.task}</a>${
    job.scheduleName ? html` · fired by schedule <a href="/schedules">${job.scheduleName}</a>${job.scheduledFor ? ` for ${formatTime(job.scheduledFor)}` : ''}` : ''
  }</p>
${job.lastError ? html`<section class="card"><h2>Last error</h2><pre class="code error">${job.lastError}</pre></section>` : ''}
<div class="grid2">
  <section class="card"><h2>Run</h2><dl class="facts">
    <dt>Status</dt><dd>${statusBadge(job.status)}</dd>
    <dt>Attempts</dt><dd>${job.attempts} of ${job.maxAttempts}${attemptsNote(job)}</dd>
    <dt>Priority</dt><dd>${job.priority}</dd>
    <dt>Timeout</dt><dd>${formatDuration(job.timeoutMs)}</dd>
    <dt>Idempotency key</dt><dd>${job.idempotencyKey ?? html`<span class="muted">—</span>`}</dd>
    ${job.fairnessKey === null ? '' : html`<dt>Fairness key</dt><dd class="mono">${job.fairnessKey}</dd>`}
    ${parentFact(job)}
    ${batch}
    ${observabilityFacts(job)}
    ${job.status === 'QUEUED' ? html`<dt>Waiting</dt><dd>${flowWaitingReason(job, flow, now, facts !== undefined && toBool(facts.task_paused))}</dd>` : ''}
    ${job.status === 'WAITING' ? html`<dt>Waiting</dt><dd>${job.pendingChildren > 0 ? html`for ${job.pendingChildren.toLocaleString('en-US')} ${job.pendingChildren === 1 ? 'child' : 'children'} to end` : flowWaitingReason(job, null, now)}</dd>` : ''}
    ${lease(job, now)}
  </dl></section>
  <section class="card"><h2>Timings</h2><dl class="facts">
    <dt>Created</dt><dd>${timeFact(job.createdAt, now)}</dd>
    <dt>Run at</dt><dd>${timeFact(job.runAt, now)}</dd>
    <dt>Updated</dt><dd>${timeFact(job.updatedAt, now)}</dd>
    <dt>Finished</dt><dd>${job.finishedAt ? timeFact(job.finishedAt, now) : html`<span class="muted">—</span>`}</dd>
    ${job.finishedAt ? html`<dt>Created → finished</dt><dd>${formatDuration(job.finishedAt.getTime() - job.createdAt.getTime())} <span class="muted">(waiting and every attempt)</span></dd>` : ''}
  </dl></section>
</div>
${streams}
${stepsSection(job, now)}
${restartForm(job, csrf)}
${childrenSection(job)}
${attemptTimeline(job, now)}
<div class="grid2">
  <section class="card"><h2>Payload</h2>${jsonBlock(job.payload)}</section>
  <section class="card"><h2>Result</h2>${job.status === 'DONE' ? jsonBlock(job.result) : html`<p class="muted">Only a DONE job has a result.</p>`}</section>
</div>`;
  return { title: `Job #${job.id}`, section: job.status === 'DEAD' ? 'dead' : 'jobs', body, notice: noticeOf(c) };
}

/** Why a QUEUED job (or a WAITING one asleep or waiting for an event) has not run yet, in order of what holds it back first. */
function waitingReason(job: JobDetail, now: number, taskPaused: boolean, debounceKey: string | null): Html {
  const reasons: Html[] = [];
  const sleep = currentSleep(job, now);
  if (taskPaused) reasons.push(html`its task <a href="/tasks">${job.task}</a> is paused`);
  if (debounceKey !== null) reasons.push(html`it is debounced (key <code>${debounceKey}</code>): an enqueue with that key pushes it back again`);
  const eventWait = currentEventWait(job);
  if (eventWait) reasons.push(eventWaitReason(eventWait, now));
  else if (sleep) reasons.push(sleepingReason(sleep, now));
  else if (job.runAt.getTime() > now) reasons.push(html`${isRetrying(job) ? 'it waits to retry' : 'it is delayed'} until ${formatTime(job.runAt)} (${relativeTime(job.runAt, now)})`);
  if (reasons.length === 0) return html`Waiting: due, for the next tick to claim it.`;
  return html`Waiting: ${reasons.map((r, i) => html`${i > 0 ? '; ' : ''}${r}`)}.`;
}

function attemptsNote(job: Job): Html | string {
  if (job.status === 'DEAD') return html` <span class="muted">· ${job.attempts >= job.maxAttempts ? 'ran out of attempts' : 'failed permanently'}</span>`;
  if (isRetrying(job)) return html` <span class="muted">· waiting to retry</span>`;
  return '';
}

/** Why a QUEUED job has not run yet: not due, held by a concurrency or rate limit, or due for the next tick. */
export function flowWaitingReason(job: JobDetail, flow: FlowWait | null, now: number, taskPaused = false): Html {
  if (taskPaused) return html`its task is paused: no tick claims it until the task is resumed`;
  const eventWait = currentEventWait(job);
  if (eventWait) return eventWaitReason(eventWait, now);
  const sleep = currentSleep(job, now);
  if (sleep) return html`sleeping (step <code>${sleep.id}</code>): not due until ${timeFact(job.runAt, now)}`;
  if (job.runAt.getTime() > now) return html`not due until ${timeFact(job.runAt, now)}${isRetrying(job) ? ' (waiting to retry)' : ''}`;
  const reasons = flow ? describeFlowWait(flow) : [];
  if (reasons.length > 0) return html`${reasons.map((r, i) => html`${i > 0 ? html`<br>` : ''}held back by its ${r}`)}`;
  return html`due: the next tick with a free slot claims it`;
}

function timeFact(date: Date, now: number): Html {
  return html`${formatTime(date)} <span class="muted">(${relativeTime(date, now)})</span>`;
}

/** The lease rows of the Run facts: who holds the job and until when (RUNNING only). */
function lease(job: Job, now: number): Html {
  if (job.status !== 'RUNNING' || !job.lockedUntil) return html`<dt>Lease</dt><dd class="muted">none (only a RUNNING job holds one)</dd>`;
  const expired = job.lockedUntil.getTime() < now;
  return html`<dt>Lease held by</dt><dd class="mono">${job.lockedBy}</dd>
  <dt>Lease until</dt><dd>${timeFact(job.lockedUntil, now)} ${expired ? html`<span class="badge tone-warn">expired: the reaper returns it</span>` : ''}</dd>
  <dt>Cancel requested</dt><dd>${job.cancelRequested ? 'yes: it stops at the next heartbeat' : 'no'}</dd>`;
}

/**
 * The buttons the state machine allows (src/core/state.ts): Retry for DEAD or CANCELLED, Cancel
 * for QUEUED and WAITING (its waiting children with it), and for RUNNING a request to stop. DONE has none.
 */
export function jobActions(job: Job, csrf: string, returnTo: string, inRow = false, now?: number): Html {
  const button = (action: 'retry' | 'cancel' | 'run-now', label: string, className: string) => html`<form class="inline" method="post" action="/jobs/${job.id}/${action}">
  <input type="hidden" name="csrf" value="${csrf}"><input type="hidden" name="return_to" value="${returnTo}">
  <button type="submit" class="${className}">${label}</button></form>`;
  switch (job.status) {
    case 'DEAD':
    case 'CANCELLED':
      return button('retry', 'Retry', inRow ? '' : 'primary');
    case 'QUEUED':
      // "Run now" for a delayed or retry-waiting job (rescheduleJob, due now).
      return now !== undefined && job.runAt.getTime() > now
        ? html`${button('run-now', 'Run now', 'primary')} ${button('cancel', 'Cancel', 'danger')}`
        : button('cancel', 'Cancel', 'danger');
    case 'RUNNING':
      return job.cancelRequested ? html`` : button('cancel', 'Request cancel', 'danger');
    case 'WAITING':
      // "Run now" for a sleep (its step's wake instant is its runAt): rescheduleJob, due now.
      return now !== undefined && 'steps' in job && currentSleep(job as JobDetail, now)
        ? html`${button('run-now', 'Run now', 'primary')} ${button('cancel', 'Cancel', 'danger')}`
        : button('cancel', 'Cancel', 'danger');
    case 'DONE':
      return html``;
  }
}
