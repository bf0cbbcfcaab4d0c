/** What the streams browser tests share (test/http/streams.browser.test.ts, test/platform/cloudflare-streams.test.ts). */
import type { Page } from 'playwright-core';
import { expect } from 'vitest';
import * as z from 'zod';
import { fakeAnswer } from '../../examples/node/src/fake-model.ts';
import { defineTask, type TaskContext } from '../../src/index.ts';
import type { Job } from '../../src/core/types.ts';

/** The example's `answer` task (examples/node/src/tasks.ts) on this repository's source, its tokens 120 ms apart. */
export const answerTask = defineTask({
  name: 'answer',
  payload: z.object({ question: z.string().min(1).max(500) }),
  // Fits every platform's tick (a Worker's alarm tick gives 24 s); an answer takes seconds.
  timeoutMs: 20_000,
  handler: async ({ question }, ctx: TaskContext) => {
    const out = ctx.stream();
    let text = '';
    for await (const token of fakeAnswer(question, { delayMs: 120, signal: ctx.signal })) {
      out.write(token);
      text += token;
    }
    return { answer: text };
  },
});

/**
 * Asks on the page at `base`/ask, sees part of the answer while the job is RUNNING, reloads, and
 * sees the rest arrive after what was shown: the final text is the job's result, once.
 * Shared with the workerd test (test/platform/cloudflare-streams.test.ts).
 */
export async function askAndFollow(page: Page, base: string, getJob: (id: string) => Promise<Pick<Job, 'status' | 'result'> | null | undefined>): Promise<void> {
  await page.goto(`${base}/ask`);
  await page.evaluate('sessionStorage.clear()');
  await page.fill('input[name=question]', 'How does resuming after a reload work?');
  await page.click('button[type=submit]');
  await expect.poll(() => page.evaluate(`JSON.parse(sessionStorage.getItem('skiplock-example.ask') ?? 'null')?.id ?? null`), { timeout: 10_000 }).not.toBeNull();
  const id = String(await page.evaluate(`JSON.parse(sessionStorage.getItem('skiplock-example.ask')).id`));
  // Chunks on the page while the job still runs.
  await expect.poll(async () => (await page.textContent('#answer').then((t) => t ?? '')).split(' ').length, { timeout: 20_000 }).toBeGreaterThan(3);
  expect((await getJob(id))?.status).toBe('RUNNING');
  const beforeReload = await page.textContent('#answer').then((t) => t ?? '');
  await page.reload();
  // Redrawn at once from sessionStorage, then continued after the last chunk shown.
  expect((await page.textContent('#answer').then((t) => t ?? '')).startsWith(beforeReload)).toBe(true);
  await expect.poll(() => page.textContent('#status'), { timeout: 40_000 }).toBe(`job ${id}: done`);
  const job = await getJob(id);
  expect(job?.status).toBe('DONE');
  expect(await page.textContent('#answer')).toBe((job?.result as { answer: string }).answer);
}

