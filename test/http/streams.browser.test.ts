/**
 * Streams in real headless Chromium (./chromium.ts), served by the Node runner:
 *  - the example's page (examples/node: its `answer` task's fake model, its /ask page and routes)
 *    shows the answer's chunks while the job is still RUNNING, survives a reload mid-answer
 *    (sessionStorage + `?after=`: no chunk twice, none lost), and ends with the whole answer;
 *  - the dashboard's job page appends a running job's chunks live, as text (a chunk that is an
 *    `<img onerror>` stays text: no dialog, no script error).
 * The same page in workerd: test/platform/cloudflare-streams.test.ts.
 */
import { fileURLToPath } from 'node:url';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, expect, test } from 'vitest';
import * as z from 'zod';
import { defineTask, type TaskContext } from '../../src/index.ts';
import { startNodeRunner, type NodeRunner } from '../../src/platform/node/runner.ts';
import { createSkiplock, type Skiplock } from '../../src/runtime/skiplock.ts';
import { exampleTasks } from '../../src/tasks/examples.ts';
import { createTestDb, type TestDb } from '../support/db.ts';
import { launchChromium, type LaunchedChromium } from './chromium.ts';
import { answerTask, askAndFollow } from './streams-browser-support.ts';
import { API_TOKEN } from './helpers.ts';

/** A job that writes a line every 150 ms, one of them an HTML injection attempt. */
const ticker = defineTask({
  name: 'ticker',
  payload: z.object({ lines: z.number().int() }),
  timeoutMs: 60_000,
  handler: async ({ lines }, ctx: TaskContext) => {
    const out = ctx.stream('log');
    for (let i = 1; i <= lines; i++) {
      out.write(i === 3 ? '<img src=x onerror=alert(1)>\n' : `line ${i}\n`);
      await new Promise((resolve) => setTimeout(resolve, 150));
    }
    return {};
  },
});

// Imported by path: the example's modules import skiplock's types from 'skiplock', which this
// repository's type-check does not resolve (the example has its own; vite strips type imports).
const ASK_ROUTES = fileURLToPath(new URL('../../examples/node/src/ask-routes.ts', import.meta.url));

let db: TestDb;
let skiplock: Skiplock;
let runner: NodeRunner;
let browser: LaunchedChromium;
let page: Page;
const problems: string[] = [];

beforeAll(async () => {
  db = await createTestDb();
  skiplock = createSkiplock({ sql: db.sql, tasks: [...exampleTasks, answerTask, ticker], log: () => {}, streamTokens: { secret: API_TOKEN } });
  const { askRoutes } = (await import(ASK_ROUTES)) as { askRoutes: (request: Request, skiplock: Skiplock) => Promise<Response | undefined> };
  runner = await startNodeRunner({ skiplock, apiToken: API_TOKEN, port: 0, log: () => {}, tick: { pollIntervalMs: 50 }, routes: (request) => askRoutes(request, skiplock) });
  browser = await launchChromium({ viewport: { width: 1100, height: 800 } });
  page = browser.context.pages()[0] ?? (await browser.context.newPage());
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
  await runner?.stop();
  await db?.drop();
});

const statusOf = async (id: string) => (await skiplock.getJob(id))?.status;

test("the example's page shows the answer while the job runs, and resumes after a reload with nothing twice", { timeout: 120_000 }, async () => {
  await askAndFollow(page, runner.url, (id) => skiplock.getJob(id));
  expect(problems).toEqual([]);
});

test("the dashboard's job page appends a running job's chunks live, as text", { timeout: 120_000 }, async () => {
  await page.goto(`${runner.url}/login`);
  await page.fill('input[name=token]', API_TOKEN);
  await Promise.all([page.waitForURL(`${runner.url}/`), page.click('button[type=submit]')]);
  const job = await skiplock.enqueue({ task: 'ticker', payload: { lines: 40 } } as never);
  // Open the page once the first chunks are stored: the box is there, server-rendered, and live.
  await until(async () => ((await skiplock.readStream(job.id, { name: 'log' })).chunks.length >= 2));
  await page.goto(`${runner.url}/jobs/${job.id}`);
  const box = page.locator('[data-stream="log"]');
  await expect.poll(() => box.locator('[data-stream-state]').textContent(), { timeout: 10_000 }).toBe('live');
  const before = (await box.locator('pre').textContent()) ?? '';
  await expect.poll(async () => ((await box.locator('pre').textContent()) ?? '').length, { timeout: 10_000 }).toBeGreaterThan(before.length);
  expect(await statusOf(job.id)).toBe('RUNNING');
  await expect.poll(() => box.locator('[data-stream-state]').textContent(), { timeout: 30_000 }).toBe('ended');
  const text = (await box.locator('pre').textContent()) ?? '';
  expect(text).toBe(Array.from({ length: 40 }, (_, i) => (i === 2 ? '<img src=x onerror=alert(1)>\n' : `line ${i + 1}\n`)).join(''));
  expect(await box.locator('img').count()).toBe(0);
  expect(problems).toEqual([]);
});

async function until(check: () => Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

