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

const url = process.argv[2] ?? 'http://127.0.0.1:8787';
const n = Number(process.argv[3] ?? 50);
const token = process.env.API_TOKEN ?? (await readFile(new URL('../../.skiplock/api-token', import.meta.url), 'utf8')).trim();
const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };

interface JobJson { id: string; status: string; createdAt: string; runAt: string; finishedAt: string | null }

async function enqueue(body: object): Promise<JobJson> {
  const response = await fetch(`${url}/v1/jobs`, { method: 'POST', headers, body: JSON.stringify(body) });
  if (response.status !== 201) throw new Error(`enqueue: HTTP ${response.status} ${await response.text()}`);
  return ((await response.json()) as { job: JobJson }).job;
}

async function finished(id: string, timeoutMs: number): Promise<JobJson> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const job = ((await (await fetch(`${url}/v1/jobs/${id}`, { headers })).json()) as { job: JobJson }).job;
    if (job.finishedAt) return job;
    if (Date.now() > deadline) throw new Error(`job ${id} still ${job.status} after ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

function summary(label: string, ms: number[]): void {
  const sorted = [...ms].sort((a, b) => a - b);
  const at = (p: number) => sorted[Math.min(sorted.length - 1, Math.ceil(p * sorted.length) - 1)]!;
  console.log(`${label}: n=${sorted.length} p50=${at(0.5)} ms p90=${at(0.9)} ms p99=${at(0.99)} ms max=${sorted.at(-1)} ms`);
}

const http: number[] = [];
for (let i = 0; i < n; i++) {
  const job = await finished((await enqueue({ task: 'echo', payload: { message: `latency ${i}` } })).id, 30_000);
  http.push(Date.parse(job.finishedAt!) - Date.parse(job.createdAt));
  await new Promise((resolve) => setTimeout(resolve, 50));
}
summary('enqueued over HTTP, created → finished', http);

// Due times spread over a whole minute, so every part of the cron invocations' cycle is sampled.
const delayed = await Promise.all(
  Array.from({ length: n }, (_, i) => enqueue({ task: 'echo', payload: { message: `delayed ${i}` }, delayMs: 5_000 + Math.round((60_000 * i) / n) })),
);
const done = await Promise.all(delayed.map((job) => finished(job.id, 150_000)));
summary('due later, background ticks only, due → finished', done.map((job) => Date.parse(job.finishedAt!) - Date.parse(job.runAt)));
