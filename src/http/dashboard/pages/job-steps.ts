/**
 * The job page's durable steps (docs/steps.md): the Steps table (what ran, what it returned, what
 * sleeps and what waits for a child), the parent and the children, and why a sleeping or WAITING
 * job has not run yet.
 */
import { html } from 'hono/html';
import type { JobDetail, JobStep, StepStatus } from '../../../core/types.ts';
import { CHILD_LIMIT } from '../../../store/job-detail.ts';
import { formatDuration, formatTime, plural, relativeTime, statusBadge, truncate, type Html } from '../format.ts';

/** Steps shown on the page, at most: the last ones (GET /v1/jobs/:id has them all). */
export const STEP_ROWS = 1000;

/** Output or error text longer than this is cut in the table, with the whole in a <details>. */
const INLINE_CHARS = 120;

const STEP_TONE: Record<StepStatus, 'ok' | 'bad' | 'waiting'> = { done: 'ok', failed: 'bad', sleeping: 'waiting', waiting: 'waiting' };

/** The sleep the job is in now: its latest step, a sleep still sleeping until a future instant. */
export function currentSleep(job: JobDetail, now: number): JobStep | undefined {
  const last = job.steps.at(-1);
  return last?.kind === 'sleep' && last.status === 'sleeping' && last.wakeAt && last.wakeAt.getTime() > now ? last : undefined;
}

/** "sleeping (step wait-a-day) until …, in 3 h". */
export function sleepingReason(step: JobStep, now: number): Html {
  return html`it is sleeping (step <code>${step.id}</code>) until ${formatTime(step.wakeAt!)} (${relativeTime(step.wakeAt, now)})`;
}

/** The event or callback wait the job is in (ctx.waitForEvent, waitForAny, waitForCallback): its latest such step still waiting. */
export function currentEventWait(job: JobDetail): JobStep | undefined {
  return job.steps.findLast((s) => (s.kind === 'event' || s.kind === 'any-event' || s.kind === 'callback') && s.status === 'waiting');
}

/** `event <code>a</code> key <code>k</code>` (or ` (any key)`). */
const eventAndKey = (event: string, key: string | null | undefined): Html =>
  html`event <code>${event}</code>${key ? html` key <code>${key}</code>` : ' (any key)'}`;

/** "waiting for event order.paid key o-42 until …" (or "for ever"); a callback says so. */
export function eventWaitReason(step: JobStep, now: number): Html {
  const until = step.wakeAt ? html`until ${formatTime(step.wakeAt)} (${relativeTime(step.wakeAt, now)})` : 'with no timeout';
  if (step.kind === 'callback') return html`waiting for its callback <code>${step.id}</code> to be called, ${until}`;
  if (step.kind === 'any-event') {
    const alternatives = (step.eventAlternatives ?? []).map((a, i) => html`${i > 0 ? ', or ' : ''}${eventAndKey(a.event, a.key)}`);
    return html`waiting for the first of ${alternatives} (step <code>${step.id}</code>) ${until}`;
  }
  return html`waiting for ${eventAndKey(step.eventName ?? '?', step.eventKey)} (step <code>${step.id}</code>) ${until}`;
}

/** Why a WAITING job waits: its event or callback, or its children that have not ended and which invoke steps wait on them. */
export function waitingForChildren(job: JobDetail, now = Date.now()): Html {
  const wait = currentEventWait(job);
  if (wait) return html`Waiting: ${eventWaitReason(wait, now)}; nothing runs meanwhile.`;
  const invoked = job.steps.filter((s) => s.kind === 'invoke').length;
  const waiting = job.steps.filter((s) => s.kind === 'invoke' && s.status === 'waiting');
  const shown = waiting.slice(0, 5);
  const ofTotal = invoked >= job.pendingChildren ? ` of ${invoked}` : '';
  return html`Waiting for ${job.pendingChildren.toLocaleString('en-US')}${ofTotal} ${job.pendingChildren === 1 && !ofTotal ? 'child' : 'children'} to end${
    shown.length > 0 ? html` (step${waiting.length === 1 ? '' : 's'} ${shown.map((s, i) => html`${i > 0 ? ', ' : ''}<code>${s.id}</code>`)}${waiting.length > shown.length ? ` and ${waiting.length - shown.length} more` : ''})` : ''
  }: the last one to end wakes it; nothing runs meanwhile.`;
}

/** The Run facts' Parent row: the job whose ctx.invoke enqueued this one, and its step. */
export function parentFact(job: JobDetail): Html | string {
  if (job.parentId === null) return '';
  return html`<dt>Parent</dt><dd><a href="/jobs/${job.parentId}">#${job.parentId}</a>${job.parentStep ? html` · step <code>${job.parentStep}</code>` : ''}</dd>`;
}

/** The Steps card: one row per step, in the order the handler reached them. Nothing for a job without steps. */
export function stepsSection(job: JobDetail, now: number): Html | string {
  if (job.steps.length === 0) return '';
  const shown = job.steps.slice(-STEP_ROWS);
  return html`<section class="card flush" id="steps"><h2>Steps <span class="muted">(${plural(job.steps.length, 'step')})</span></h2>
${shown.length < job.steps.length ? html`<p class="muted note">The last ${STEP_ROWS} are shown; <code>GET /v1/jobs/${job.id}</code> lists every step.</p>` : ''}
<table class="steps">
<thead><tr><th class="num">#</th><th>Step</th><th>Kind</th><th>Status</th><th class="num">Attempts</th><th>Duration</th><th>Started</th><th>Output</th></tr></thead>
<tbody>${shown.map((step) => stepRow(job, step, now))}</tbody></table>
</section>`;
}

function stepRow(job: JobDetail, step: JobStep, now: number): Html {
  return html`<tr class="${step.status === 'failed' ? 'row-bad' : ''}" data-step="${step.id}" data-kind="${step.kind}" data-status="${step.status}">
  <td class="num">${step.seq}</td>
  <td class="mono">${step.id}</td>
  <td>${step.kind}</td>
  <td><span class="badge tone-${STEP_TONE[step.status]}">${step.status}</span></td>
  <td class="num">${step.kind === 'step' ? step.attempts : html`<span class="muted">—</span>`}</td>
  <td>${step.durationMs === null ? html`<span class="muted">—</span>` : formatDuration(step.durationMs)}</td>
  <td>${relativeTime(step.startedAt, now)}</td>
  <td>${stepOutcome(job, step, now)}</td>
</tr>`;
}

/** A step's output or error; a sleep's wake time; an invoke's child (linked) and what it returned. */
function stepOutcome(job: JobDetail, step: JobStep, now: number): Html {
  if (step.kind === 'patch') return html`<span class="muted">ctx.patched marker: this job takes the patched path</span>`;
  if (step.kind === 'sleep') {
    const wake = step.wakeAt!;
    return step.status === 'sleeping'
      ? html`sleeping until ${formatTime(wake)}, ${relativeTime(wake, now)}`
      : html`woke at ${formatTime(wake)} <span class="muted">(${relativeTime(wake, now)})</span>`;
  }
  const child = step.kind === 'invoke' && step.childId !== null ? job.children.find((c) => c.id === step.childId) : undefined;
  const childLink =
    step.kind === 'invoke' && step.childId !== null
      ? html`<div><a href="/jobs/${step.childId}">#${step.childId}</a> <span class="muted">${step.childTask}</span>${child ? html` ${statusBadge(child.status)}` : ''}</div>`
      : '';
  if (step.error !== null) return html`${childLink}${longText(step.error, 'error')}`;
  if (step.status === 'done') return html`${childLink}${longText(JSON.stringify(step.output) ?? 'null', 'output')}`;
  return html`${childLink}`;
}

/** A one-line cut of a text, with the whole in a <details> when it is longer. */
function longText(text: string, kind: 'output' | 'error'): Html {
  const line = truncate(text, INLINE_CHARS);
  const cls = kind === 'error' ? 'code error' : 'code';
  if (line === text) return kind === 'error' ? html`<code class="error">${text}</code>` : html`<code>${text}</code>`;
  const whole = kind === 'output' ? prettyJson(text) : text;
  return html`<details><summary><code>${line}</code></summary><pre class="${cls}">${whole}</pre></details>`;
}

function prettyJson(text: string): string {
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return text;
  }
}

/** The Children card: the jobs this one invoked, with their status. Nothing for a job without children. */
export function childrenSection(job: JobDetail): Html | string {
  if (job.children.length === 0) return '';
  return html`<section class="card flush" id="children"><h2>Children <span class="muted">(${
    job.children.length >= CHILD_LIMIT ? `the first ${CHILD_LIMIT}` : plural(job.children.length, 'job')
  }${job.pendingChildren > 0 ? `, ${job.pendingChildren.toLocaleString('en-US')} not ended` : ''})</span></h2>
<table><thead><tr><th>ID</th><th>Task</th><th>Status</th><th>Invoked by step</th></tr></thead>
<tbody>${job.children.map((c) => html`<tr data-child="${c.id}"><td class="mono"><a href="/jobs/${c.id}">#${c.id}</a></td><td>${c.task}</td><td>${statusBadge(c.status)}</td><td class="mono">${c.parentStep}</td></tr>`)}</tbody></table>
</section>`;
}
