/**
 * The dashboard in real headless Chromium (from the npm package @sparticuz/chromium: ./chromium.ts):
 * log in, filter jobs, open a DEAD job, retry it and see it QUEUED. The app runs on a local port
 * over a test database filled by the real tick, an hour of it replayed with an injected clock.
 * Saves a screenshot of each page to test/http/.screenshots/ (ignored by git); with
 * UPDATE_SCREENSHOTS=1, to docs/screenshots/, which docs/dashboard.md shows.
 */
import { serve } from '@hono/node-server';
import { mkdir, stat } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { createApp } from '../../src/http/app.ts';
import { createSkiplock, type Skiplock } from '../../src/runtime/skiplock.ts';
import { exampleSchedules, exampleTasks } from '../../src/tasks/examples.ts';
import { createTestDb, type TestDb } from '../support/db.ts';
import { launchChromium, type LaunchedChromium } from './chromium.ts';
import { claimAsRunning } from './dashboard-support.ts';
import { API_TOKEN } from './helpers.ts';

const SCREENSHOTS = fileURLToPath(new URL(process.env.UPDATE_SCREENSHOTS ? '../../docs/screenshots/' : './.screenshots/', import.meta.url));
const QUICK_TICK = { untilIdle: true, budgetMs: 20_000, pollIntervalMs: 10 } as const;

let db: TestDb;
let skiplock: Skiplock;
let server: ReturnType<typeof serve>;
let baseUrl: string;
let context: BrowserContext;
let page: Page;
let browser: LaunchedChromium;
const problems: string[] = [];

beforeAll(async () => {
  db = await createTestDb();
  skiplock = createSkiplock({ sql: db.sql, tasks: exampleTasks, schedules: exampleSchedules, log: () => {} });
  await seedAnHourOfWork(db);
  const app = createApp({ skiplock, apiToken: API_TOKEN, tick: QUICK_TICK });
  server = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' });
  await new Promise<void>((resolve, reject) => {
    server.once('listening', resolve);
    server.once('error', reject);
  });
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  await mkdir(SCREENSHOTS, { recursive: true });
  browser = await launchChromium({ viewport: { width: 1280, height: 860 } });
  context = browser.context;
  page = context.pages()[0] ?? (await context.newPage());
  // Any script error or CSP refusal (say, of the inline script) and any dialog (an escaping failure) fails the test.
  page.on('console', (message) => {
    if (message.type() === 'error') problems.push(`console: ${message.text()}`);
  });
  page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
  page.on('dialog', (dialog) => {
    problems.push(`dialog: ${dialog.message()}`);
    void dialog.dismiss();
  });
}, 180_000);

afterAll(async () => {
  await browser?.close();
  if (server) {
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    if ('closeAllConnections' in server) server.closeAllConnections();
    await closed;
  }
  await db?.drop();
});

/** A long page (the job list) is cut at the window's height; the others are shown whole. */
const shot = (name: string, fullPage = true) => page.screenshot({ path: join(SCREENSHOTS, `${name}.png`), fullPage });

test('log in, filter jobs, open a DEAD job, retry it and see it QUEUED; a screenshot of each page', { timeout: 180_000 }, async () => {
  const started = Date.now() - 1_000; // file times may be coarser than the clock
  // Logged out: the login form, which refuses a wrong token.
  await page.goto(`${baseUrl}/jobs`);
  expect(new URL(page.url()).pathname).toBe('/login');
  const card = (await page.locator('.login .card').boundingBox())!;
  await page.screenshot({ path: join(SCREENSHOTS, 'login.png'), clip: { x: card.x - 60, y: card.y - 40, width: card.width + 120, height: card.height + 80 } });
  await page.fill('input[name=token]', 'not-the-token');
  await page.click('button[type=submit]');
  expect(await page.textContent('.notice.error')).toContain('not the API token');
  expect(problems.splice(0)).toEqual(['console: Failed to load resource: the server responded with a status of 401 (Unauthorized)']);
  await page.fill('input[name=token]', API_TOKEN);
  await Promise.all([page.waitForURL(`${baseUrl}/jobs`), page.click('button[type=submit]')]);
  const cookies = await context.cookies(baseUrl);
  expect(cookies.find((c) => c.name === 'skiplock_session')).toMatchObject({ httpOnly: true, sameSite: 'Strict' });
  // The inline script ran (the CSP nonce lets it): the auto-refresh switch is shown.
  expect(await page.isVisible('#auto-refresh')).toBe(true);
  await shot('jobs', false);

  // Overview: dead jobs and the stuck queue stand out.
  await Promise.all([page.waitForURL(`${baseUrl}/`), page.click('nav.main >> text=Overview')]);
  expect(await page.textContent('.alerts')).toContain('dead jobs');
  expect(await page.textContent('.alerts')).toContain('Queue is falling behind');
  expect(await page.locator('.chart svg rect.bar-done').count()).toBeGreaterThan(30);
  await shot('overview');

  // Filter the jobs: DEAD poison jobs only.
  await Promise.all([page.waitForURL(`${baseUrl}/jobs`), page.click('nav.main >> text=Jobs')]);
  await page.selectOption('select[name=status]', 'DEAD');
  await page.selectOption('select[name=task]', 'poison');
  await Promise.all([page.waitForURL(/\/jobs\?status=DEAD&task=poison$/), page.click('button:has-text("Filter")')]);
  const expected = await skiplock.listJobs({ status: 'DEAD', task: 'poison', limit: 500 });
  const rows = page.locator('table.jobs tbody tr');
  expect(await rows.count()).toBe(expected.jobs.length);
  expect(new Set(await rows.evaluateAll((trs) => trs.map((tr) => tr.getAttribute('data-status'))))).toEqual(new Set(['DEAD']));

  // Open the newest DEAD job and retry it.
  const dead = expected.jobs[0]!;
  await Promise.all([page.waitForURL(`${baseUrl}/jobs/${dead.id}`), rows.first().locator('a').first().click()]);
  expect(await page.textContent('.title-row .badge')).toBe('DEAD');
  expect(await page.textContent('pre.code.error')).toContain('poison: this job always fails permanently');
  await shot('job');
  await Promise.all([page.waitForURL(`${baseUrl}/jobs/${dead.id}?notice=retried&job=${dead.id}`), page.click('button:has-text("Retry")')]);
  expect(await page.textContent('.title-row .badge')).toBe('QUEUED');
  expect(await page.textContent('.notice')).toContain('was retried: it is QUEUED again');
  expect((await skiplock.getJob(dead.id))?.status).toBe('QUEUED');
  // Reloading the page after the redirect does not repeat the action (PRG): still one QUEUED job, attempts 0.
  await page.reload();
  expect(await skiplock.getJob(dead.id)).toMatchObject({ status: 'QUEUED', attempts: 0 });

  // The dead letter no longer lists it; retry another one from there.
  await Promise.all([page.waitForURL(`${baseUrl}/dead`), page.click('nav.main >> text=Dead letter')]);
  expect(await page.locator(`a[href="/jobs/${dead.id}"]`).count()).toBe(0);
  await shot('dead');
  const next = expected.jobs[1]!;
  await Promise.all([page.waitForURL(/\/dead\?notice=retried/), page.locator(`form[action="/jobs/${next.id}/retry"] button`).click()]);
  expect(await page.textContent('.notice')).toContain(`#${next.id}`);
  expect((await skiplock.getJob(next.id))?.status).toBe('QUEUED');

  // Schedules: the silent one and the one whose last run died stand out.
  await Promise.all([page.waitForURL(`${baseUrl}/schedules`), page.click('nav.main >> text=Schedules')]);
  expect(await page.textContent('tr[data-schedule="stalled-import"]')).toContain('silent');
  expect(await page.textContent('tr[data-schedule="poison-every-10-min"]')).toContain('DEAD');
  await shot('schedules');

  // A payload holding a script is only text.
  const evil = (await skiplock.listJobs({ task: 'echo', status: 'QUEUED', limit: 500 })).jobs.find((j) => JSON.stringify(j.payload).includes('<script>'))!;
  await page.goto(`${baseUrl}/jobs/${evil.id}`);
  expect(await page.textContent('.grid2 pre.code')).toContain('"message": "<script>alert(\\"pwned\\")</script>"');

  // Every page's screenshot was written by this run.
  for (const name of ['login', 'jobs', 'overview', 'job', 'dead', 'schedules'])
    expect((await stat(join(SCREENSHOTS, `${name}.png`))).mtimeMs, name).toBeGreaterThanOrEqual(started);

  // Log out: the pages need a login again.
  await Promise.all([page.waitForURL(`${baseUrl}/login`), page.click('button:has-text("Log out")')]);
  await page.goto(`${baseUrl}/`);
  expect(new URL(page.url()).pathname).toBe('/login');
  expect(problems).toEqual([]);
});

/**
 * An hour of work done by the real tick, replayed minute by minute with an injected clock (so the
 * chart has a history), then jobs in every state now, and schedules healthy, dead, disabled and silent.
 */
async function seedAnHourOfWork(testDb: TestDb): Promise<void> {
  const start = Date.now();
  let clock = new Date(start - 60 * 60_000);
  const past = createSkiplock({ sql: testDb.sql, tasks: exampleTasks, schedules: exampleSchedules, log: () => {}, now: () => clock });
  // Every 10 minutes, at minutes ≡ now + 5 (mod 10): its last instant is 5 minutes ago, replayed
  // below, and its next one 5 minutes ahead. With '*/10', a run just after a 10-minute mark made
  // the schedule's last job the newest DEAD poison job, the one the test retries: its last status
  // then read QUEUED, not DEAD.
  const offset = (new Date(start).getUTCMinutes() + 5) % 10;
  await past.putSchedule('poison-every-10-min', { cron: `${offset}-59/10 * * * *`, task: 'poison', payload: {} });
  await past.putSchedule('hourly-digest', { cron: '0 * * * *', task: 'echo', payload: { message: 'digest' } });
  await past.putSchedule('nightly-report', { daily: ['03:00'], tz: 'Europe/Berlin', task: 'echo', payload: { message: 'report' } });
  await past.putSchedule('legacy-sync', { every: '15m', task: 'echo', payload: { message: 'sync' }, enabled: false });
  for (let minute = 58; minute >= 1; minute--) {
    clock = new Date(start - minute * 60_000 + 5_000);
    const wave = 4 + Math.round(3 * Math.sin(minute / 6)) + (minute % 7);
    const jobs: Parameters<typeof past.enqueueBatch>[0][number][] = Array.from({ length: wave }, (_, i) => ({ task: 'echo', payload: { message: `order ${minute}-${i}` } }));
    if (minute % 11 === 3) jobs.push({ task: 'poison', payload: {} });
    // Fails every attempt, once a minute from here on: it shows as retrying.
    if (minute === 4) jobs.push({ task: 'flaky', payload: { failTimes: 100 } });
    await past.enqueueBatch(jobs);
    await past.tick(QUICK_TICK);
  }
  // Now: two more dead jobs, one RUNNING, one CANCELLED, some waiting, one overdue (the queue looks stuck).
  await skiplock.enqueueBatch([
    { task: 'poison', payload: {} },
    { task: 'poison', payload: {} },
    { task: 'echo', payload: { message: 'thanks for your order' } },
  ]);
  await skiplock.tick(QUICK_TICK);
  await skiplock.enqueue({ task: 'sleep', payload: { ms: 15_000 } });
  await claimAsRunning(skiplock, 'sleep');
  const cancelled = await skiplock.enqueue({ task: 'echo', payload: { message: 'never mind' }, delayMs: 3_600_000 });
  await skiplock.cancelJob(cancelled.id);
  await skiplock.enqueue({ task: 'echo', payload: { message: '<script>alert("pwned")</script>' }, delayMs: 600_000 });
  await skiplock.enqueue({ task: 'echo', payload: { message: 'tomorrow' }, delayMs: 24 * 3600_000 });
  await skiplock.enqueue({ task: 'echo', payload: { message: 'stuck since a deploy dropped the task' }, runAt: new Date(start - 14 * 60_000).toISOString() });
  // Put twenty minutes ago and never fired since: silent. (No tick runs after this.)
  clock = new Date(start - 20 * 60_000);
  await past.putSchedule('stalled-import', { cron: '*/5 * * * *', task: 'echo', payload: { message: 'import' } });
}
