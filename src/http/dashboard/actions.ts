/**
 * The dashboard's POSTs: log in, log out, retry, retry every dead job, cancel. Each answers with a redirect (303) back
 * to a page that shows the new state, so a reload never repeats the action.
 */
import type { Context, Handler } from 'hono';
import { SkiplockError } from '../../core/errors.ts';
import type { NoticeCode } from './notice.ts';
import { loginBody } from './pages/login.ts';
import { action, errorBody, localPath, respond, withQuery, type DashboardDeps } from './respond.ts';
import { layout } from './layout.ts';
import { comesFromThisSite } from './session.ts';

export function loginForm(deps: DashboardDeps): Handler {
  return async (c) => {
    const next = localPath(c.req.query('next'));
    if (await deps.sessions.current(c)) return c.redirect(next, 303);
    return respond(c, 200, (nonce) => layout({ title: 'Sign in', nonce }, loginBody(next, false)));
  };
}

export function login(deps: DashboardDeps): Handler {
  return async (c) => {
    // No session yet, so no CSRF token: the Origin check alone keeps other sites from logging a browser in.
    if (!comesFromThisSite(c)) return respond(c, 403, (nonce) => layout({ title: 'Forbidden', nonce }, errorBody('This form must be sent from the dashboard itself.')));
    const form = await c.req.parseBody();
    const next = localPath(typeof form.next === 'string' ? form.next : undefined);
    const token = typeof form.token === 'string' ? form.token : '';
    // Counted with the bearer tokens of the same source (token-throttle.ts): a held source is not even checked.
    const checked = await deps.tokenGuard.check(c.req.raw, c.env, token, [deps.apiToken]);
    if (!checked.ok && checked.waitMs > 0) {
      const seconds = Math.max(1, Math.ceil(checked.waitMs / 1000));
      c.header('Retry-After', String(seconds));
      return respond(c, 429, (nonce) => layout({ title: 'Sign in', nonce }, loginBody(next, `Too many failed sign-ins: try again in ${seconds} s.`)));
    }
    if (!checked.ok) return respond(c, 401, (nonce) => layout({ title: 'Sign in', nonce }, loginBody(next, true)));
    await deps.sessions.start(c);
    return c.redirect(next, 303);
  };
}

export function logout(deps: DashboardDeps): Handler {
  return action(deps, async (c) => {
    deps.sessions.end(c);
    return c.redirect('/login', 303);
  });
}

export function retry(deps: DashboardDeps): Handler {
  return action(deps, (c, form) =>
    changeJob(c, form.return_to, async (id) => {
      await deps.skiplock.retryJob(id);
      deps.startWork(c);
      return 'retried';
    }),
  );
}

/** "Retry all" on the dead letter: up to 1000 of one task's DEAD jobs (or of every task's). */
export function retryDead(deps: DashboardDeps): Handler {
  return action(deps, async (c, form) => {
    const task = form.task ? form.task : undefined;
    const retried = await deps.skiplock.retryDead(task === undefined ? {} : { task });
    if (retried > 0) deps.startWork(c);
    return c.redirect(withQuery('/dead', { ...(task === undefined ? {} : { task }), notice: 'retried-dead', count: String(retried) }), 303);
  });
}

/** "Run now" for a delayed or retry-waiting QUEUED job: due now (rescheduleJob with delayMs 0). */
export function runNow(deps: DashboardDeps): Handler {
  return action(deps, (c, form) =>
    changeJob(c, form.return_to, async (id) => {
      await deps.skiplock.rescheduleJob(id, { delayMs: 0 });
      deps.startWork(c);
      return 'run-now';
    }),
  );
}

/** Pause or resume a task from the tasks page. */
export function pauseOrResume(deps: DashboardDeps, what: 'pause' | 'resume'): Handler {
  return action(deps, async (c) => {
    const name = c.req.param('name') ?? '';
    try {
      if (what === 'pause') await deps.skiplock.pauseTask(name);
      else if ((await deps.skiplock.resumeTask(name)).counts.QUEUED > 0) deps.startWork(c);
    } catch (error) {
      if (error instanceof SkiplockError && error.code === 'not_found') return c.redirect(withQuery('/tasks', { notice: 'unknown-task', task: name }), 303);
      if (!(error instanceof SkiplockError) || error.code !== 'invalid_request') throw error;
      return c.redirect('/tasks', 303);
    }
    return c.redirect(withQuery('/tasks', { notice: what === 'pause' ? 'paused' : 'resumed', task: name }), 303);
  });
}

export function cancel(deps: DashboardDeps): Handler {
  return action(deps, (c, form) =>
    changeJob(c, form.return_to, async (id) => ((await deps.skiplock.cancelJob(id)).outcome === 'cancelled' ? 'cancelled' : 'cancel-requested')),
  );
}

/** Runs one job action and redirects to `returnTo` (default: the job's page) with its notice. */
async function changeJob(c: Context, returnTo: string | undefined, change: (id: string) => Promise<NoticeCode>): Promise<Response> {
  const id = c.req.param('id') ?? '';
  let notice: NoticeCode;
  try {
    notice = await change(id);
  } catch (error) {
    if (!(error instanceof SkiplockError) || (error.code !== 'conflict' && error.code !== 'not_found')) throw error;
    notice = error.code === 'conflict' ? 'conflict' : 'not-found';
  }
  return c.redirect(withQuery(localPath(returnTo, `/jobs/${encodeURIComponent(id)}`), { notice, job: id }), 303);
}
