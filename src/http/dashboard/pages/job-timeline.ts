/**
 * The job page's answer to "why did it fail, how far did it get, where is its trace": the attempt
 * history as a timeline (with the attempt that runs now), the progress, and the trace ids.
 */
import { html } from 'hono/html';
import type { AttemptOutcome, AttemptRecord } from '../../../core/attempt-history.ts';
import type { Job } from '../../../core/types.ts';
import { HISTORY_LIMIT } from '../../../store/history.ts';
import { formatDuration, formatTime, relativeTime, toneBadge, type Html } from '../format.ts';

const OUTCOME_TONE: Record<AttemptOutcome, 'ok' | 'warn' | 'bad' | 'muted'> = {
  done: 'ok',
  retry: 'warn',
  'lease-lost': 'warn',
  dead: 'bad',
  released: 'muted',
  sleeping: 'muted',
  waiting: 'muted',
  cancelled: 'muted',
};

const OUTCOME_TEXT: Record<AttemptOutcome, string> = {
  done: 'done',
  retry: 'failed, retried',
  'lease-lost': 'lease lost',
  dead: 'failed, dead',
  released: 'released',
  sleeping: 'asleep (ctx.sleep)',
  waiting: 'waiting for its children',
  cancelled: 'cancelled',
};

/** The Attempts card: one entry per attempt kept, oldest first, then the running one. */
export function attemptTimeline(job: Job, now: number): Html {
  const running = job.status === 'RUNNING';
  if (job.history.length === 0 && !running) return html``;
  return html`<section class="card"><h2>Attempts</h2>
<ol class="timeline">
  ${job.history.map((record) => attemptEntry(record, now))}
  ${running ? runningEntry(job, now) : ''}
</ol>
${job.history.length >= HISTORY_LIMIT ? html`<p class="muted">The last ${HISTORY_LIMIT} attempts are kept; older ones were dropped.</p>` : ''}
</section>`;
}

function attemptEntry(record: AttemptRecord, now: number): Html {
  return html`<li class="attempt tone-line-${OUTCOME_TONE[record.outcome]}">
  <div class="attempt-head"><strong>Attempt ${record.attempt}</strong> ${toneBadge(OUTCOME_TONE[record.outcome], OUTCOME_TEXT[record.outcome])}
    <span class="muted">${record.startedAt ? formatTime(record.startedAt) : 'start unknown'} · ${
      record.durationMs === null ? 'duration unknown' : formatDuration(record.durationMs)
    } · ended ${relativeTime(record.endedAt, now)}${record.worker ? html` · on <span class="mono">${record.worker}</span>` : ''}</span></div>
  ${record.error ? html`<pre class="code error">${record.error}</pre>` : ''}
  ${record.progress !== null ? html`<div class="attempt-fact"><span class="muted">Progress</span> <code>${JSON.stringify(record.progress)}</code></div>` : ''}
  ${record.traceparent ? html`<div class="attempt-fact"><span class="muted">Trace</span> ${traceId(record.traceparent)}</div>` : ''}
</li>`;
}

function runningEntry(job: Job, now: number): Html {
  return html`<li class="attempt tone-line-running">
  <div class="attempt-head"><strong>Attempt ${job.attempts}</strong> <span class="badge status-running">running</span>
    <span class="muted">${job.startedAt ? html`started ${relativeTime(job.startedAt, now)}` : ''}${job.lockedBy ? html` · on <span class="mono">${job.lockedBy}</span>` : ''}</span></div>
  ${job.progress !== null ? html`<div class="attempt-fact"><span class="muted">Progress</span> <code>${JSON.stringify(job.progress)}</code></div>` : ''}
</li>`;
}

/** The Run facts' rows for progress and trace. */
export function observabilityFacts(job: Job): Html {
  return html`<dt>Progress</dt><dd>${job.progress === null ? html`<span class="muted">—</span>` : html`<code>${JSON.stringify(job.progress)}</code>`}</dd>
    <dt>Trace</dt><dd>${job.traceparent ? traceId(job.traceparent) : html`<span class="muted">—</span>`}</dd>`;
}

/** A traceparent as its trace id (what a tracing backend searches by), the full value on hover. */
function traceId(traceparent: string): Html {
  return html`<span class="mono" title="traceparent ${traceparent}">${traceparent.split('-')[1] ?? traceparent}</span>`;
}
