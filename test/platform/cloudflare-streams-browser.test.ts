/**
 * Streams in the real Workers runtime (wrangler dev, the Durable Object ticker) read by a real
 * browser (headless Chromium, test/http/chromium.ts): the streaming example's page
 * (examples/node's /ask page, routes and fake model, bundled into test/fixtures/streams-worker)
 * shows the answer's chunks while the job runs, resumes after a reload with nothing twice, and
 * ends with the whole answer. The same check under the Node runner: test/http/streams.browser.test.ts.
 */
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { statement } from '../../src/store/sql.ts';
import { launchChromium, type LaunchedChromium } from '../http/chromium.ts';
import { askAndFollow } from '../http/streams-browser-support.ts';
import { startWorkerUnderTest, type WorkerUnderTest } from './worker-under-test.ts';

const TOKEN = 'streams-test-token-0123456789';
let under: WorkerUnderTest;
let browser: LaunchedChromium;
let page: Page;
const problems: string[] = [];

beforeAll(async () => {
  // PUBLIC_URL: with it the Worker's skiplock has a stream-token secret (CALLBACK_SECRET or API_TOKEN).
  under = await startWorkerUnderTest({ API_TOKEN: TOKEN, TICK_POLL_INTERVAL_MS: '200', PUBLIC_URL: 'http://127.0.0.1' }, { config: 'test/fixtures/streams-worker/wrangler.toml' });
  browser = await launchChromium({ viewport: { width: 1100, height: 800 } });
  page = browser.context.pages()[0] ?? (await browser.context.newPage());
  page.on('console', (message) => {
    if (message.type() === 'error') problems.push(`console: ${message.text()}`);
  });
  page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
}, 180_000);
afterAll(async () => {
  await browser?.close();
  await under?.stop();
});

test("in workerd, the example's page shows the answer while the job runs and resumes after a reload", { timeout: 120_000 }, async () => {
  await askAndFollow(page, under.worker.url, async (id) => {
    const [row] = await under.db.sql.query(statement(`SELECT status, result FROM skiplock.job WHERE id = $1`, [id]));
    return row ? { status: row.status as never, result: row.result } : null;
  });
  expect(problems).toEqual([]);
});
