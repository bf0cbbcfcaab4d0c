// The queue in a Node process: migrations, then the runner (the HTTP API, and a tick whenever work is due).
import { createSkiplock } from 'skiplock';
import { migrations } from 'skiplock/migrations';
import { startNodeRunner } from 'skiplock/node';
import { createPgDriver } from 'skiplock/pg';
import { askRoutes } from './ask-routes.js';
import { schedules, tasks } from './tasks.js';

const { DATABASE_URL, API_TOKEN } = process.env;
if (!DATABASE_URL || !API_TOKEN) throw new Error('set DATABASE_URL and API_TOKEN (npx skiplock dev prints a local DATABASE_URL)');

// streamTokens: the secret that signs the per-job read tokens the /ask page gets (skiplock.streamToken).
const skiplock = createSkiplock({ sql: createPgDriver(DATABASE_URL), tasks, schedules, streamTokens: { secret: process.env.STREAM_SECRET ?? API_TOKEN } });
await skiplock.migrate(migrations); // safe from several processes at once

// Typed by the tasks: a wrong task name or payload is a compile-time error.
await skiplock.enqueue({ task: 'send-welcome', payload: { email: 'ada@example.com', name: 'Ada' }, idempotencyKey: 'welcome-ada' });

// It logs one line: where it listens (runner.url), its tasks and schedules. `routes`: the app's own
// routes on the same server, tried first — here the page at /ask that streams an answer.
const runner = await startNodeRunner({ skiplock, apiToken: API_TOKEN, port: Number(process.env.PORT ?? 8787), routes: (request) => askRoutes(request, skiplock) });
console.log(`open ${runner.url}/ask to watch an answer stream in`);

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    runner.stop().then(() => process.exit(0));
  });
}
