/**
 * `skiplock dev` in a project of its own: it prints DATABASE_URL once PostgreSQL is up and
 * migrated and the Neon proxy listens; the production Neon driver reaches the database through
 * the proxy; SIGINT stops everything it started (the postgres process is gone); a second run
 * reuses the data in .skiplock/.
 */
import { seeded } from '../support/seed.ts';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { chmod, mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { neon, neonConfig } from '@neondatabase/serverless';
import { afterAll, expect, test } from 'vitest';
import { createPgDriver } from '../../src/store/drivers/pg.ts';
import { migrations } from '../../src/store/migrations-data.ts';
import { statement } from '../../src/store/sql.ts';

const ROOT = resolve(import.meta.dirname, '../..');
const NODE = join(ROOT, 'node_modules/.bin/node');
let project: string;
const children = new Set<ChildProcess>();

afterAll(async () => {
  for (const child of children) child.kill('SIGKILL');
  if (project) await rm(project, { recursive: true, force: true });
});

interface Dev {
  child: ChildProcess;
  output: () => string;
  variables: Record<string, string>;
  exited: Promise<number | null>;
}

function spawnDev(cwd: string, args: string[]): ChildProcess {
  const child = spawn(NODE, ['--experimental-strip-types', '--disable-warning=ExperimentalWarning', join(ROOT, 'src/cli.ts'), 'dev', ...args], {
    cwd,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.add(child);
  child.on('exit', () => children.delete(child));
  return child;
}

async function startDev(cwd: string, args: string[] = ['--pg-port', '0', '--proxy-port', '0']): Promise<Dev> {
  const child = spawnDev(cwd, args);
  let output = '';
  child.stdout!.on('data', (chunk) => (output += chunk));
  child.stderr!.on('data', (chunk) => (output += chunk));
  const exited = new Promise<number | null>((done) => child.on('exit', (code) => done(code)));
  const deadline = Date.now() + 45_000;
  while (!/# -{10,}/.test(output)) {
    if (Date.now() > deadline || child.exitCode !== null) throw new Error(`skiplock dev did not get ready:\n${output}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  const variables = Object.fromEntries([...output.matchAll(/^(API_TOKEN|DATABASE_URL|NEON_FETCH_ENDPOINT|NEON_WS_PROXY|CRON_SECRET)=(\S+)$/gm)].map((m) => [m[1]!, m[2]!]));
  return { child, output: () => output, variables, exited };
}

async function postgresPid(): Promise<number> {
  return Number((await readFile(join(project, '.skiplock/postgres/postmaster.pid'), 'utf8')).split('\n')[0]);
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

test('skiplock dev: PostgreSQL migrated, the Neon proxy, the variables; SIGINT stops it all', async () => {
  project = await mkdtemp(join(tmpdir(), 'skiplock-dev-'));
  await chmod(project, 0o755); // as root, the postgres user must reach .skiplock/postgres

  const dev = await startDev(project);
  // CRON_SECRET too, without --cron: a Next.js app's tick route and a Worker's /v1/tick accept it.
  expect(Object.keys(dev.variables).sort()).toEqual(['API_TOKEN', 'CRON_SECRET', 'DATABASE_URL', 'NEON_FETCH_ENDPOINT', 'NEON_WS_PROXY']);
  expect(dev.variables.CRON_SECRET!.length).toBeGreaterThanOrEqual(16);
  expect((await readFile(join(project, '.skiplock/cron-secret'), 'utf8')).trim()).toBe(dev.variables.CRON_SECRET);
  // A generated API_TOKEN, long enough for the 16-character minimum, kept for the next run.
  expect(dev.variables.API_TOKEN!.length).toBeGreaterThanOrEqual(32);
  expect((await readFile(join(project, '.skiplock/api-token'), 'utf8')).trim()).toBe(dev.variables.API_TOKEN);
  expect(dev.output()).toContain('# ---- skiplock dev ----');
  expect(await readFile(join(project, '.skiplock/dev.env'), 'utf8')).toBe(
    `API_TOKEN=${dev.variables.API_TOKEN}\nDATABASE_URL=${dev.variables.DATABASE_URL}\nNEON_FETCH_ENDPOINT=${dev.variables.NEON_FETCH_ENDPOINT}\nNEON_WS_PROXY=${dev.variables.NEON_WS_PROXY}\nCRON_SECRET=${dev.variables.CRON_SECRET}\n`,
  );
  // Secrets, like the files beside it.
  expect((await stat(join(project, '.skiplock/dev.env'))).mode & 0o777).toBe(0o600);

  const sql = createPgDriver(dev.variables.DATABASE_URL!, { max: 1 });
  try {
    const applied = await sql.query<{ id: number }>(statement('SELECT id FROM skiplock.migration ORDER BY id'));
    expect(applied.map((r) => r.id)).toEqual(migrations.map((m) => m.id));
  } finally {
    await sql.close();
  }

  // The production HTTP driver, pointed at the local proxy as the printed variables say.
  neonConfig.fetchEndpoint = dev.variables.NEON_FETCH_ENDPOINT!;
  const [row] = await neon(dev.variables.DATABASE_URL!).query('SELECT count(*)::int AS jobs FROM skiplock.job');
  expect(row).toEqual({ jobs: 0 });

  const pid = await postgresPid();
  expect(alive(pid)).toBe(true);
  dev.child.kill('SIGINT');
  expect(await dev.exited).toBe(0);
  expect(dev.output()).toContain('SIGINT: stopping');
  expect(alive(pid)).toBe(false);

  // The data stays: a second run finds the database migrated and applies nothing.
  const again = await startDev(project);
  expect(again.output()).not.toContain('applied migrations');
  expect(again.variables.API_TOKEN).toBe(dev.variables.API_TOKEN);
  again.child.kill('SIGINT');
  expect(await again.exited).toBe(0);
});

test('restarts keep the proxy token and the ports, so the pasted variables stay valid; --new-token and a port flag change them', { timeout: 180_000 }, async () => {
  const home = await mkdtemp(join(tmpdir(), 'skiplock-dev-restart-'));
  await chmod(home, 0o755);
  const stop = async (dev: Dev) => {
    dev.child.kill('SIGINT');
    expect(await dev.exited).toBe(0);
  };
  const pasted = async (variables: Record<string, string>) => {
    neonConfig.fetchEndpoint = variables.NEON_FETCH_ENDPOINT!;
    return neon(variables.DATABASE_URL!).query('SELECT 1 AS one').then((rows) => rows[0], (error: Error) => error.message);
  };
  try {
    // The first run picks free ports (0) and a token, and keeps them in .skiplock/dev-state.json (0600).
    const first = await startDev(home);
    const state = join(home, '.skiplock/dev-state.json');
    expect((await stat(state)).mode & 0o777).toBe(0o600);
    expect(await pasted(first.variables)).toEqual({ one: 1 });
    await stop(first);

    // Restarted twice without flags: the same variables; the first run's, as pasted, still work.
    for (let restart = 0; restart < 2; restart += 1) {
      const again = await startDev(home, []);
      expect(again.variables).toEqual(first.variables);
      expect(await pasted(first.variables)).toEqual({ one: 1 });
      await stop(again);
    }

    // --new-token: a new proxy token (the ports kept); the old endpoint gets the error that names the fix.
    const renewed = await startDev(home, ['--new-token']);
    expect(renewed.variables.NEON_FETCH_ENDPOINT).not.toBe(first.variables.NEON_FETCH_ENDPOINT);
    expect(new URL(renewed.variables.NEON_FETCH_ENDPOINT!).port).toBe(new URL(first.variables.NEON_FETCH_ENDPOINT!).port);
    expect(renewed.variables.DATABASE_URL).toBe(first.variables.DATABASE_URL);
    expect(renewed.output()).toContain('--new-token: a new proxy token');
    const stale = await pasted(first.variables);
    expect(stale).toContain('npx skiplock dev');
    expect(stale).toContain('.dev.vars');
    expect(await pasted(renewed.variables)).toEqual({ one: 1 });
    await stop(renewed);

    // A port flag picks that port (0: a new free one), the token kept; the next run keeps the new port.
    const moved = await startDev(home, ['--proxy-port', '0']);
    expect(new URL(moved.variables.NEON_FETCH_ENDPOINT!).pathname).toBe(new URL(renewed.variables.NEON_FETCH_ENDPOINT!).pathname);
    await stop(moved);
    const kept = await startDev(home, []);
    expect(kept.variables).toEqual(moved.variables);
    await stop(kept);

    // A kept port taken by something else: one line naming it and the flag that picks a new one.
    const proxyPort = Number(new URL(kept.variables.NEON_FETCH_ENDPOINT!).port);
    const busy = createServer();
    await new Promise<void>((done) => busy.listen(proxyPort, '127.0.0.1', done));
    try {
      const { code, output } = await runToExit(spawnDev(home, []));
      expect(code).toBe(1);
      expect(output.trim().split('\n'), output).toHaveLength(1);
      expect(output).toContain(`port ${proxyPort}`);
      expect(output).toContain('--proxy-port 0');
    } finally {
      busy.close();
    }
  } finally {
    await rm(home, { recursive: true, force: true });
  }
});

test('a port in use: one line naming it and the option that avoids it; the data directory untouched', async () => {
  const busy = createServer();
  await new Promise<void>((done) => busy.listen(0, '127.0.0.1', done));
  const { port } = busy.address() as AddressInfo;
  const other = await mkdtemp(join(tmpdir(), 'skiplock-dev-busy-'));
  try {
    for (const [flag, args] of [
      ['--pg-port', ['--pg-port', String(port), '--proxy-port', '0']],
      ['--proxy-port', ['--pg-port', '0', '--proxy-port', String(port)]],
    ] as const) {
      const { code, output } = await runToExit(spawnDev(other, [...args]));
      expect(code).toBe(1);
      expect(output.trim().split('\n'), output).toHaveLength(1);
      expect(output).toContain(`port ${port} is in use`);
      expect(output).toContain(`${flag} 0`);
      expect(existsSync(join(other, '.skiplock/postgres')), output).toBe(false);
    }
  } finally {
    busy.close();
    await rm(other, { recursive: true, force: true });
  }
});

test('a start that fails stops what it started and exits 1 (it does not hang)', async () => {
  // PostgreSQL starts, then the migrations refuse the database (an applied one was changed).
  const dev = await startDev(project);
  const sql = createPgDriver(dev.variables.DATABASE_URL!, { max: 1 });
  try {
    await sql.query(statement(`UPDATE skiplock.migration SET checksum = 'changed' WHERE id = $1`, [migrations[0]!.id]));
  } finally {
    await sql.close();
  }
  dev.child.kill('SIGINT');
  expect(await dev.exited).toBe(0);

  const { code, output } = await runToExit(spawnDev(project, ['--pg-port', '0', '--proxy-port', '0']));
  expect(output).toContain('[skiplock dev] failed:');
  expect(code).toBe(1);
  // PostgreSQL had started (before the migrations) and was stopped cleanly: it removes its postmaster.pid.
  expect(existsSync(join(project, '.skiplock/postgres/PG_VERSION'))).toBe(true);
  expect(existsSync(join(project, '.skiplock/postgres/postmaster.pid'))).toBe(false);
});

/** Waits (30 s at most) for a run that should fail: its exit code and what it wrote to stderr. */
async function runToExit(child: ChildProcess): Promise<{ code: number | null; output: string }> {
  let output = '';
  child.stderr!.on('data', (chunk) => (output += chunk));
  const code = await new Promise<number | null>((done) => {
    const timer = setTimeout(() => done(-1), 30_000);
    child.on('exit', (exitCode) => (clearTimeout(timer), done(exitCode)));
  });
  return { code, output };
}

test('--cron: drives the Worker started after it, so a sleeping workflow wakes; nothing due returns at once', { timeout: 120_000 }, async () => {
  const { freePort } = await import('../../src/dev/embedded-postgres.ts');
  const { startWranglerDev } = await import('../../src/dev/wrangler-dev.ts');
  const home = await mkdtemp(join(tmpdir(), 'skiplock-dev-cron-'));
  await chmod(home, 0o755);
  const port = await freePort();
  const child = spawnDev(home, ['--pg-port', '0', '--proxy-port', '0', '--cron', `http://127.0.0.1:${port}`]);
  let output = '';
  child.stdout!.on('data', (chunk) => (output += chunk));
  child.stderr!.on('data', (chunk) => (output += chunk));
  const exited = new Promise<number | null>((done) => child.on('exit', (code) => done(code)));
  let worker: Awaited<ReturnType<typeof startWranglerDev>> | undefined;
  try {
    const deadline = Date.now() + 45_000;
    while (!/NEON_WS_PROXY=\S+/.test(output)) {
      if (Date.now() > deadline || child.exitCode !== null) throw new Error(`skiplock dev did not get ready:\n${output}`);
      await new Promise((r) => setTimeout(r, 100));
    }
    const vars = Object.fromEntries([...output.matchAll(/^ *(DATABASE_URL|NEON_FETCH_ENDPOINT)=(\S+)$/gm)].map((m) => [m[1]!, m[2]!]));
    // Written behind the Worker's back, before it runs: only the scheduled entry can find it.
    const sql = createPgDriver(vars.DATABASE_URL!, { max: 1 });
    const [job] = await sql.query<{ id: string }>(
      statement(seeded(`INSERT INTO skiplock.job_record (task, payload, timeout_ms) VALUES ('signup-workflow', '{"email":"a@example.com","waitMs":1500}', 3000)`, 'id::text AS id')),
    );
    worker = await startWranglerDev({ port, persistTo: join(home, 'wrangler'), stdio: 'ignore', vars: { ...vars, API_TOKEN: 'dev-token-0123456789' } });
    const status = async () => String((await sql.query<{ status: string }>(statement(`SELECT status FROM skiplock.job WHERE id = $1`, [job!.id])))[0]!.status);
    const until = Date.now() + 40_000;
    while ((await status()) !== 'DONE') {
      if (Date.now() > until) throw new Error(`the workflow is ${await status()}:\n${output}`);
      await new Promise((r) => setTimeout(r, 200));
    }
    expect(output).toContain(`calling http://127.0.0.1:${port}/cdn-cgi/handler/scheduled`);
    await sql.close();
    // Nothing due now: the scheduled invocation makes no statement worth waiting for.
    const started = performance.now();
    const response = await fetch(`${worker.url}/cdn-cgi/handler/scheduled?cron=*+*+*+*+*`);
    await response.text();
    expect(response.status).toBe(200);
    expect(performance.now() - started).toBeLessThan(2_000);
  } finally {
    await worker?.stop();
    child.kill('SIGINT');
    await exited;
    await rm(home, { recursive: true, force: true });
  }
});
