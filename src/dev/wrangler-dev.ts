/**
 * Runs the Worker in the real Workers runtime: `wrangler dev` (workerd) on a local port, with
 * `/__scheduled` enabled so that a local cron driver can fire the `scheduled` handler. Used by
 * `npm start` and by the platform tests. Nothing is fetched from the network.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export interface WranglerDevOptions {
  port: number;
  /** Worker variables, passed with `--var` (they override wrangler.toml's `[vars]`). */
  vars: Record<string, string>;
  /** Where workerd keeps local state (Durable Object storage). */
  persistTo: string;
  /** Give up when the Worker does not answer /healthz within this many ms. Default 60 000. */
  readyTimeoutMs?: number;
  /** Where wrangler's output goes. Default: this process's stdout/stderr. */
  stdio?: 'inherit' | 'ignore';
  /** Aborting it while waiting for the Worker stops wrangler and rejects. */
  signal?: AbortSignal;
}

export interface WranglerDev {
  url: string;
  pid: number;
  /** SIGTERM to wrangler (it stops workerd), then SIGKILL to its process group after 5 s. */
  stop(): Promise<void>;
}

export const PROJECT_ROOT = fileURLToPath(new URL('../../', import.meta.url));
const WRANGLER_BIN = join(dirname(createRequire(import.meta.url).resolve('wrangler/package.json')), 'bin', 'wrangler.js');

export async function startWranglerDev(options: WranglerDevOptions): Promise<WranglerDev> {
  const url = `http://127.0.0.1:${options.port}`;
  const args = [WRANGLER_BIN, 'dev', '--ip', '127.0.0.1', '--port', String(options.port), '--test-scheduled',
    '--persist-to', options.persistTo, '--show-interactive-dev-session=false', '--log-level', 'warn',
    ...Object.entries(options.vars).flatMap(([key, value]) => ['--var', `${key}:${value}`])];
  const child = spawn(process.execPath, args, {
    cwd: PROJECT_ROOT,
    // Its own process group: a terminal's Ctrl-C reaches only us, and we stop it in order.
    detached: true,
    stdio: ['ignore', options.stdio ?? 'inherit', options.stdio ?? 'inherit'],
    // Offline: no telemetry, no download of the `Request.cf` object; logs stay beside the state.
    env: { ...process.env, WRANGLER_SEND_METRICS: 'false', WRANGLER_SEND_ERROR_REPORTS: 'false',
      CLOUDFLARE_CF_FETCH_ENABLED: 'false', WRANGLER_LOG_PATH: join(options.persistTo, 'logs') },
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const stop = () => stopProcess(child, exited);
  try {
    await waitUntilReady(`${url}/healthz`, exited, options.readyTimeoutMs ?? 60_000, options.signal);
  } catch (error) {
    await stop();
    throw error;
  }
  return { url, pid: child.pid!, stop };
}

async function waitUntilReady(healthUrl: string, exited: Promise<void>, timeoutMs: number, signal?: AbortSignal): Promise<void> {
  let gone = false;
  void exited.then(() => (gone = true));
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    signal?.throwIfAborted();
    if (gone) throw new Error('wrangler dev exited before the Worker was ready');
    const ok = await fetch(healthUrl, { signal: AbortSignal.timeout(2_000) }).then((r) => r.ok, () => false);
    if (ok) return;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  throw new Error(`the Worker did not answer ${healthUrl} within ${timeoutMs} ms`);
}

async function stopProcess(child: ChildProcess, exited: Promise<void>): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill('SIGTERM');
  const timer = setTimeout(() => {
    try {
      process.kill(-child.pid!, 'SIGKILL'); // wrangler's group: wrangler, its cli and workerd
    } catch {
      // already gone
    }
  }, 5_000);
  await exited;
  clearTimeout(timer);
}
