/**
 * Runs the Worker in the real Workers runtime: `wrangler dev` (workerd) on a local port, with
 * `/__scheduled` enabled so that a local cron driver can fire the `scheduled` handler. Used by
 * `npm start` and by the platform tests. Nothing is fetched from the network.
 *
 * The Worker's variables hold secrets (API_TOKEN, DATABASE_URL), so they do not go on wrangler's
 * command line (`--var`), which every local user can read with `ps`: they go in a file of mode
 * 0600 in a private temp dir, given with `--env-file`, and removed when wrangler stops.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export interface WranglerDevOptions {
  port: number;
  /** Worker variables (they override wrangler.toml's `[vars]`), handed over in a private file. */
  vars: Record<string, string>;
  /** Where workerd keeps local state (Durable Object storage). */
  persistTo: string;
  /** Give up when the Worker does not answer /healthz within this many ms. Default 60 000. */
  readyTimeoutMs?: number;
  /** Where wrangler's output goes. Default: this process's stdout/stderr. */
  stdio?: 'inherit' | 'ignore';
  /** Aborting it while waiting for the Worker stops wrangler and rejects. */
  signal?: AbortSignal;
  /** Another wrangler.toml, relative to the project root (a test fixture). Default: the project's. */
  config?: string;
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
  const varsText = envFileText(options.vars);
  const varsDir = await mkdtemp(join(tmpdir(), 'skiplock-vars-')); // mode 0700
  const varsFile = join(varsDir, 'worker.env');
  await writeFile(varsFile, varsText, { mode: 0o600 });
  const removeVars = () => rm(varsDir, { recursive: true, force: true });
  const args = [WRANGLER_BIN, 'dev', '--ip', '127.0.0.1', '--port', String(options.port), '--test-scheduled',
    '--persist-to', options.persistTo, '--show-interactive-dev-session=false', '--log-level', 'warn',
    '--env-file', varsFile, ...(options.config ? ['-c', options.config] : [])];
  const child = spawn(process.execPath, args, {
    cwd: PROJECT_ROOT,
    // Its own process group: a terminal's Ctrl-C reaches only us, and we stop it in order.
    detached: true,
    stdio: ['ignore', options.stdio ?? 'inherit', options.stdio ?? 'inherit'],
    // Offline: no telemetry, no download of the `Request.cf` object; logs stay beside the state.
    // The variables come from the file only (not from this environment, nor from .dev.vars).
    env: { ...withoutKeys(process.env, Object.keys(options.vars)), WRANGLER_SEND_METRICS: 'false',
      WRANGLER_SEND_ERROR_REPORTS: 'false', CLOUDFLARE_CF_FETCH_ENABLED: 'false', CLOUDFLARE_INCLUDE_PROCESS_ENV: 'false',
      CLOUDFLARE_LOAD_DEV_VARS_FROM_DOT_ENV: 'true', WRANGLER_LOG_PATH: join(options.persistTo, 'logs') },
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  void exited.then(removeVars);
  const stop = () => stopProcess(child, exited).then(removeVars);
  try {
    await waitUntilReady(`${url}/healthz`, exited, options.readyTimeoutMs ?? 60_000, options.signal);
  } catch (error) {
    await stop();
    throw error;
  }
  return { url, pid: child.pid!, stop };
}

/**
 * KEY=value lines as wrangler reads an `--env-file`: dotenv, then dotenv-expand, which expands
 * `$NAME` and `${NAME}` unless the `$` is escaped as `\$` (and turns every `\$` into `$`). Each
 * value is quoted with a quote it does not contain, so `#`, spaces and the other quotes stay.
 */
export function envFileText(vars: Record<string, string>): string {
  return Object.entries(vars).map(([key, value]) => {
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(key)) throw new Error(`not a variable name: ${JSON.stringify(key)}`);
    const quote = ["'", '`'].find((q) => !value.includes(q));
    if (quote === undefined || /[\r\n]/.test(value)) throw new Error(`${key}: a value with both ' and \` or a line break cannot be handed to wrangler dev`);
    return `${key}=${quote}${value.replaceAll('$', '\\$')}${quote}\n`;
  }).join('');
}

function withoutKeys(env: NodeJS.ProcessEnv, keys: readonly string[]): NodeJS.ProcessEnv {
  const copy = { ...env };
  for (const key of keys) delete copy[key];
  return copy;
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
