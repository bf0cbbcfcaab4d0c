/**
 * OpenTelemetry in the real Workers runtime: a Worker (test/fixtures/otel-worker) that passes the
 * API in (createSkiplock({ otel })) with an in-memory exporter, on a real PostgreSQL through the
 * Neon HTTP driver and the local Neon proxy.
 */
import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { freePort } from '../../src/dev/embedded-postgres.ts';
import { startNeonProxy } from '../../src/dev/neon-proxy.ts';
import { PROJECT_ROOT } from '../../src/dev/wrangler-dev.ts';
import { createTestDb, type TestDb } from '../support/db.ts';

const WRANGLER = join(dirname(createRequire(import.meta.url).resolve('wrangler/package.json')), 'bin', 'wrangler.js');

let db: TestDb;
let proxy: Awaited<ReturnType<typeof startNeonProxy>>;
let stateDir: string;
let url: string;
let stop: () => Promise<void> = async () => {};

beforeAll(async () => {
  db = await createTestDb();
  proxy = await startNeonProxy();
  stateDir = await mkdtemp(join(tmpdir(), 'skiplock-otel-wrangler-'));
  const port = await freePort();
  url = `http://127.0.0.1:${port}`;
  const child = spawn(
    process.execPath,
    [WRANGLER, 'dev', '-c', 'test/fixtures/otel-worker/wrangler.toml', '--ip', '127.0.0.1', '--port', String(port), '--persist-to', stateDir,
      '--show-interactive-dev-session=false', '--log-level', 'warn', '--var', `DATABASE_URL:${db.url}`, '--var', `NEON_FETCH_ENDPOINT:${proxy.fetchEndpoint}`],
    { cwd: PROJECT_ROOT, detached: true, stdio: 'ignore',
      env: { ...process.env, WRANGLER_SEND_METRICS: 'false', WRANGLER_SEND_ERROR_REPORTS: 'false', CLOUDFLARE_CF_FETCH_ENABLED: 'false', WRANGLER_LOG_PATH: join(stateDir, 'logs') } },
  );
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.kill('SIGTERM');
    const timer = setTimeout(() => process.kill(-child.pid!, 'SIGKILL'), 5_000);
    await exited;
    clearTimeout(timer);
  };
  const deadline = Date.now() + 60_000;
  while (!(await fetch(`${url}/healthz`, { signal: AbortSignal.timeout(2_000) }).then((r) => r.ok, () => false))) {
    if (Date.now() > deadline || child.exitCode !== null) throw new Error('the OpenTelemetry fixture Worker did not start');
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}, 90_000);

afterAll(async () => {
  await stop();
  await proxy?.close();
  await db?.drop();
  if (stateDir) await rm(stateDir, { recursive: true, force: true });
});

test("in workerd: the attempt's span is a child of the enqueuer's, and the handler's spans nest under it", async () => {
  const res = await fetch(`${url}/run`, { method: 'POST' });
  expect(res.status).toBe(200);
  const { job, caller, spans } = (await res.json()) as any;
  expect(job.status).toBe('DONE');
  expect(job.traceparent).toBe(`00-${caller.traceId}-${caller.spanId}-01`);
  const run = spans.find((s: any) => s.name === 'run traced');
  expect(run).toMatchObject({ traceId: caller.traceId, parentSpanId: caller.spanId, attributes: { 'skiplock.job.id': job.id, 'skiplock.attempt': 1, 'skiplock.outcome': 'done' } });
  expect(spans.find((s: any) => s.name === 'inside the handler')).toMatchObject({ traceId: caller.traceId, parentSpanId: run.spanId });
  expect(job.history[0].traceparent).toBe(`00-${run.traceId}-${run.spanId}-01`);
}, 60_000);
