// Enqueues a job through the runner's HTTP API with skiplock/client and waits until it is DONE.
import { createClient } from 'skiplock/client';
import type { tasks } from './tasks.js';

const url = process.env.SKIPLOCK_URL ?? 'http://127.0.0.1:8787';
const client = createClient<typeof tasks>({ url, token: process.env.API_TOKEN ?? '' });

const job = await client.enqueue({ task: 'send-welcome', payload: { email: 'grace@example.com', name: 'Grace' } });
let current = job;
for (let i = 0; i < 100 && current.status !== 'DONE' && current.status !== 'DEAD'; i++) {
  await new Promise((resolve) => setTimeout(resolve, 100));
  current = (await client.getJob(job.id)) ?? current;
}
console.log(JSON.stringify(current));
