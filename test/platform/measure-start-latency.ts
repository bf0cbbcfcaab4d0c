/**
 * Measures how long a job waits to start on a running stack (`npm start` or `npm run start:node`):
 *
 *   node --experimental-strip-types test/platform/measure-start-latency.ts [URL] [N]
 *
 * 1. enqueued over HTTP: created → finished (the enqueue's own tick, waitUntil on the Worker);
 * 2. due later (delayMs spread over a minute): due → finished, picked up by the background ticks
 *    alone (the Worker: the minute cron's invocations; Node: the runner's loop), as no request is
 *    made near the time the job becomes due.
 * Times are the database's (createdAt, runAt, finishedAt), so no clocks are compared. `echo`
 * finishes in well under a millisecond, so finished − due bounds started − due from above.
 */
import { readFile } from 'node:fs/promises';
import { finishedJob, summary, type JobTimes } from './measure-support.ts';

const url = process.argv[2] ?? 'http://127.0.0.1:8787';
const n = Number(process.argv[3] ?? 50);
const token = process.env.API_TOKEN ?? (await readFile(new URL('../../.skiplock/api-token', import.meta.url), 'utf8')).trim();
const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };

async function enqueue(body: object): Promise<JobTimes> {
  const response = await fetch(`${url}/v1/jobs`, { method: 'POST', headers, body: JSON.stringify(body) });
  if (response.status !== 201) throw new Error(`enqueue: HTTP ${response.status} ${await response.text()}`);
  return ((await response.json()) as { job: JobTimes }).job;
}

const http: number[] = [];
for (let i = 0; i < n; i++) {
  const job = await finishedJob(url, headers, (await enqueue({ task: 'echo', payload: { message: `latency ${i}` } })).id, 30_000);
  http.push(Date.parse(job.finishedAt!) - Date.parse(job.createdAt));
  await new Promise((resolve) => setTimeout(resolve, 50));
}
summary('enqueued over HTTP, created → finished', http);

// Due times spread over a whole minute, so every part of the cron invocations' cycle is sampled.
const delayed = await Promise.all(
  Array.from({ length: n }, (_, i) => enqueue({ task: 'echo', payload: { message: `delayed ${i}` }, delayMs: 5_000 + Math.round((60_000 * i) / n) })),
);
const done = await Promise.all(delayed.map((job) => finishedJob(url, headers, job.id, 150_000)));
summary('due later, background ticks only, due → finished', done.map((job) => Date.parse(job.finishedAt!) - Date.parse(job.runAt)));
