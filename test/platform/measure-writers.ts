/**
 * Enqueue → start for each writer skiplock ships, on a running stack (`npm start`: workerd;
 * `npm run start:node`: the Node runner; a `next start` app):
 *
 *   DATABASE_URL=… node --experimental-strip-types test/platform/measure-writers.ts [URL] [N] [BASE_PATH]
 *
 * 1. the deployment's own HTTP API (`POST /v1/jobs`: the enqueue's tick runs in that invocation);
 * 2. the typed client (`createClient`, the same route);
 * 3. another process with `createSkiplock({ sql, deployment: { url, token } })`: it writes to the
 *    database directly and wakes the deployment (`POST /v1/wake`);
 * 4. the CLI with `SKIPLOCK_URL` and `API_TOKEN` (a child process per job; its start-up is not
 *    counted: the clock starts at the row's `created_at`).
 *
 * Times are the database's (created_at → finished_at; `echo` finishes in well under a
 * millisecond), so no clocks are compared. DATABASE_URL is the one `npm start` prints for the CLI.
 * The stack's minute cron may run meanwhile: a wake that failed would show as tens of seconds.
 */
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import { createClient } from '../../src/client/client.ts';
import { createSkiplock } from '../../src/runtime/skiplock.ts';
import { createPgDriver } from '../../src/store/drivers/pg.ts';
import { tasks } from '../../src/tasks/index.ts';
import { finishedJob, summary, type JobTimes } from './measure-support.ts';

const url = (process.argv[2] ?? 'http://127.0.0.1:8787').replace(/\/+$/, '');
const n = Number(process.argv[3] ?? 20);
const base = `${url}${process.argv[4] ?? ''}`;
const token = process.env.API_TOKEN ?? (await readFile(new URL('../../.skiplock/api-token', import.meta.url), 'utf8')).trim();
const databaseUrl = process.env.DATABASE_URL;
if (!databaseUrl) throw new Error('DATABASE_URL: the database the stack uses (npm start prints it for the CLI)');
const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };

async function measure(label: string, enqueue: (i: number) => Promise<string>): Promise<void> {
  const ms: number[] = [];
  for (let i = 0; i < n; i++) {
    const job = await finishedJob(base, headers, await enqueue(i), 90_000);
    ms.push(Date.parse(job.finishedAt!) - Date.parse(job.createdAt));
    // Apart by more than the deployment wake's coalescing window (COALESCE_MS): each write alone.
    await new Promise((resolve) => setTimeout(resolve, 400));
  }
  summary(label, ms);
}

const payload = (writer: string, i: number) => ({ message: `${writer} ${i}` });

await measure('the deployment\'s HTTP API', async (i) => {
  const response = await fetch(`${base}/v1/jobs`, { method: 'POST', headers, body: JSON.stringify({ task: 'echo', payload: payload('http', i) }) });
  if (response.status !== 201) throw new Error(`enqueue: HTTP ${response.status} ${await response.text()}`);
  return ((await response.json()) as { job: JobTimes }).job.id;
});

const client = createClient<typeof tasks>({ url: base, token });
await measure('the typed client', async (i) => (await client.enqueue({ task: 'echo', payload: payload('client', i) })).id);

const sql = createPgDriver(databaseUrl, { max: 2 });
const outside = createSkiplock({ sql, tasks, deployment: { url: base, token } });
await measure('another process with deployment', async (i) => (await outside.enqueue({ task: 'echo', payload: payload('outside', i) })).id);
await sql.close();

const run = promisify(execFile);
const cli = fileURLToPath(new URL('../../src/app/cli.ts', import.meta.url));
await measure('the CLI with SKIPLOCK_URL', async (i) => {
  const { stdout } = await run(process.execPath, ['--experimental-strip-types', '--no-warnings', cli, 'enqueue', 'echo', JSON.stringify(payload('cli', i))], {
    env: { ...process.env, DATABASE_URL: databaseUrl, SKIPLOCK_URL: base, API_TOKEN: token },
  });
  return (JSON.parse(stdout) as { job: { id: string } }).job.id;
});
