/** A job page's batch facts (issue 35): a batch task's job shows its batch key and, while RUNNING, the jobs claimed with it. */
import { html } from 'hono/html';
import type { Job } from '../../../core/types.ts';
import { BATCH_MATES_LISTED, batchMates } from '../../../store/batches.ts';
import type { DashboardDeps } from '../respond.ts';
import { formatDuration, type Html } from '../format.ts';

/** The Run facts' batch rows; empty for a job of a task without `batch`. One statement for a RUNNING one. */
export async function batchFacts(deps: DashboardDeps, job: Job): Promise<Html | string> {
  if (job.batchKey === null) return '';
  const key = html`<dt>Batch key</dt><dd>${job.batchKey === '' ? html`<span class="muted">none (one group per task)</span>` : html`<code>${job.batchKey}</code>`}</dd>`;
  const batch = (deps.skiplock.tasks.get(job.task) as { batch?: { maxSize: number; maxWaitMs: number } } | undefined)?.batch;
  if (job.status === 'QUEUED' && batch)
    return html`${key}<dt>Batch</dt><dd data-batch-rule>runs in a call with its group's due jobs, once ${batch.maxSize.toLocaleString('en-US')} are due or the oldest has waited ${formatDuration(batch.maxWaitMs)}</dd>`;
  if (job.status !== 'RUNNING' || !job.lockedBy) return key;
  const mates = await deps.skiplock.sql.query<{ id: string }>(batchMates({ id: job.id, lockedBy: job.lockedBy, task: job.task, batchKey: job.batchKey }));
  const links = mates.map((m, i) => html`${i > 0 ? ', ' : ''}<a href="/jobs/${m.id}">#${m.id}</a>`);
  return html`${key}<dt>In this call with</dt><dd data-batch-mates>${mates.length === 0 ? html`<span class="muted">no other job</span>` : links}${
    mates.length === BATCH_MATES_LISTED ? html` <span class="muted">(the first ${BATCH_MATES_LISTED})</span>` : ''
  }</dd>`;
}
