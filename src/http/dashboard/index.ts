/**
 * The dashboard: server-rendered HTML pages over the Skiplock facade, served by the same app on
 * every platform (no build step, no CDN, one small inline script). Signed in with the API token;
 * see session.ts for the cookie and CSRF, respond.ts for what every page and action checks.
 *
 *   GET  /              overview: counts, lag, the last hour, what needs attention
 *   GET  /jobs          jobs by status and task      GET /jobs/:id   one job
 *   GET  /dead          the dead letter              GET /schedules  schedules
 *   POST /jobs/:id/retry, /jobs/:id/cancel       GET|POST /login, POST /logout
 *   POST /dead/retry    every dead job (or one task's) back to the queue
 *   POST /jobs/:id/run-now   a delayed or retry-waiting job, due now
 *   GET  /tasks         tasks: counts, paused or active   POST /tasks/:name/pause, /tasks/:name/resume
 *   POST /jobs/:id/restart   from a step      GET|POST /jobs/bulk   retry / cancel all matching (versions.ts)
 */
import type { App, RouteDeps } from '../app-types.ts';
import { cancel, login, loginForm, logout, pauseOrResume, retry, retryDead, runNow } from './actions.ts';
import { tasksPage } from './pages/tasks.ts';
import { eventsPage } from './pages/events.ts';
import { deadPage } from './pages/dead.ts';
import { jobPage } from './pages/job.ts';
import { jobsPage } from './pages/jobs.ts';
import { overviewPage } from './pages/overview.ts';
import { schedulesPage } from './pages/schedules.ts';
import { page, type DashboardDeps } from './respond.ts';
import { bulkAction, bulkConfirmPage, restart } from './versions.ts';
import { createDashboardSessions } from './session.ts';

export function registerDashboardRoutes(app: App, routeDeps: RouteDeps): void {
  const deps: DashboardDeps = { ...routeDeps, sessions: createDashboardSessions(routeDeps.apiToken) };
  app.get('/', page(deps, (request) => overviewPage(deps, request)));
  app.get('/jobs', page(deps, (request) => jobsPage(deps, request)));
  // Before /jobs/:id, which would take "bulk" for an id.
  app.get('/jobs/bulk', page(deps, (request) => bulkConfirmPage(deps, request)));
  app.post('/jobs/bulk', bulkAction(deps));
  app.post('/jobs/:id/restart', restart(deps));
  app.get('/jobs/:id', page(deps, (request) => jobPage(deps, request)));
  app.get('/dead', page(deps, (request) => deadPage(deps, request)));
  app.get('/schedules', page(deps, (request) => schedulesPage(deps, request)));
  app.post('/jobs/:id/retry', retry(deps));
  app.post('/dead/retry', retryDead(deps));
  app.post('/jobs/:id/cancel', cancel(deps));
  app.post('/jobs/:id/run-now', runNow(deps));
  app.get('/tasks', page(deps, (request) => tasksPage(deps, request)));
  app.get('/events', page(deps, (request) => eventsPage(deps, request)));
  app.post('/tasks/:name/pause', pauseOrResume(deps, 'pause'));
  app.post('/tasks/:name/resume', pauseOrResume(deps, 'resume'));
  app.get('/login', loginForm(deps));
  app.post('/login', login(deps));
  app.post('/logout', logout(deps));
}
