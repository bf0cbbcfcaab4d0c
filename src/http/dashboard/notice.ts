/**
 * The line shown after an action (post/redirect/get): the action redirects with `?notice=<code>&job=<id>`
 * and the page turns the code into one of these fixed sentences, so no text from the URL is shown.
 */
import type { Context } from 'hono';
import { html } from 'hono/html';
import { isJobId } from '../../core/job-id.ts';
import type { Html } from './format.ts';

export const NOTICES = {
  retried: { error: false, text: (id: string) => html`Job <a href="/jobs/${id}">#${id}</a> was retried: it is QUEUED again, due now, with fresh attempts.` },
  cancelled: { error: false, text: (id: string) => html`Job <a href="/jobs/${id}">#${id}</a> was cancelled.` },
  'cancel-requested': {
    error: false,
    text: (id: string) => html`Job <a href="/jobs/${id}">#${id}</a> is running: it was asked to stop, and ends CANCELLED at its worker's next heartbeat.`,
  },
  restarted: { error: false, text: (id: string) => html`Job <a href="/jobs/${id}">#${id}</a> was restarted: QUEUED, due now, with fresh attempts and the steps before the chosen one kept.` },
  'run-now': { error: false, text: (id: string) => html`Job <a href="/jobs/${id}">#${id}</a> is due now: the next tick runs it.` },
  conflict: { error: true, text: (id: string) => html`Job <a href="/jobs/${id}">#${id}</a> was not changed: its state does not allow that (any more).` },
  'not-found': { error: true, text: (id: string) => html`There is no job #${id} (any more).` },
} as const;

export type NoticeCode = keyof typeof NOTICES;

/** The notice after a bulk retry of the dead letter: `?notice=retried-dead&count=<n>`. */
function bulkNotice(count: string | undefined): Html | undefined {
  if (count === undefined || !/^\d{1,7}$/.test(count)) return undefined;
  const n = Number(count);
  return html`<div class="notice" role="status">${n === 0 ? 'No dead jobs were left to retry.' : html`${n} dead job${n === 1 ? ' was' : 's were'} retried: QUEUED again, due now, with fresh attempts.`}</div>`;
}

/** After "retry / cancel all matching" (src/http/dashboard/versions.ts): `?notice=bulk-retried|bulk-cancelled&count=<n>`. */
function bulkActionNotice(code: 'bulk-retried' | 'bulk-cancelled', count: string | undefined): Html | undefined {
  if (count === undefined || !/^\d{1,9}$/.test(count)) return undefined;
  const n = Number(count);
  return html`<div class="notice" role="status">${n} job${n === 1 ? ' was' : 's were'} ${code === 'bulk-retried' ? 'retried: QUEUED again, due now' : 'cancelled or asked to stop'}.</div>`;
}

/** After pausing or resuming a task: `?notice=paused|resumed|unknown-task&task=<name>` (the name is escaped text). */
function taskNotice(code: string, task: string | undefined): Html | undefined {
  if (task === undefined || task.length === 0 || task.length > 200) return undefined;
  if (code === 'unknown-task')
    return html`<div class="notice error" role="status">No deployment registers a task <strong>${task}</strong>: nothing was paused. (A deployment registers its tasks with its first tick, or when it migrates.)</div>`;
  return html`<div class="notice" role="status">Task <strong>${task}</strong> ${code === 'paused' ? 'is paused: no tick claims its jobs until it is resumed (running jobs finish; its schedules keep firing into the queue).' : 'is active again: its due jobs are claimed from the next tick.'}</div>`;
}

export function noticeOf(c: Context): Html | undefined {
  const code = c.req.query('notice');
  if (code === 'paused' || code === 'resumed' || code === 'unknown-task') return taskNotice(code, c.req.query('task'));
  if (code === 'retried-dead') return bulkNotice(c.req.query('count'));
  if (code === 'bulk-retried' || code === 'bulk-cancelled') return bulkActionNotice(code, c.req.query('count'));
  const id = c.req.query('job');
  if (code === undefined || !Object.hasOwn(NOTICES, code) || id === undefined || !isJobId(id)) return undefined;
  const notice = NOTICES[code as NoticeCode];
  return html`<div class="notice${notice.error ? ' error' : ''}" role="status">${notice.text(id)}</div>`;
}
