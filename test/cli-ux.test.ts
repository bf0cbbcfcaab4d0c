/**
 * The CLI in a new user's first hours (issue 30, item 14): the single-job commands people try
 * (`skiplock retry 19`, `jobs cancel 19`), a mistake answered in one line with a hint (not the
 * whole usage), and `--tasks ./src/tasks.ts` run as a user runs it — the built CLI under plain
 * `node`: it loads where Node can strip types, and says in one line what to do where it cannot
 * (the machine's own Node 20, when there is one).
 */
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { typeScriptSupport } from '../src/cli/tasks-module.ts';
import { runFile, type CliRun } from './support/cli-run.ts';
import { createTestDb, type TestDb } from './support/db.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const CLI = join(ROOT, 'src/app/cli.ts');

let db: TestDb;
beforeAll(async () => (db = await createTestDb()));
afterAll(() => db?.drop());

type Run = CliRun;

function run(file: string, args: string[], options: { env?: Record<string, string | undefined>; cwd?: string } = {}): Promise<Run> {
  const env: NodeJS.ProcessEnv = { ...process.env, DATABASE_URL: db.url };
  for (const [key, value] of Object.entries(options.env ?? {})) {
    if (value === undefined) delete env[key];
    else env[key] = value;
  }
  delete env.NODE_OPTIONS; // vitest's own, if any: the CLI runs as a user runs it
  return runFile(file, args, { env, cwd: options.cwd ?? ROOT });
}

/** This repository's CLI (the package's, with the example tasks), from source. */
const cli = (args: string[], env?: Record<string, string | undefined>) =>
  run(process.execPath, ['--experimental-strip-types', '--disable-warning=ExperimentalWarning', CLI, ...args], { env });

const lines = (text: string) => text.split('\n').filter((line) => line.trim() !== '');

async function deadJob(): Promise<string> {
  const enqueued = await cli(['enqueue', 'poison']);
  expect(enqueued.code, enqueued.stderr).toBe(0);
  const tick = await cli(['tick', '--budget', '20000']);
  expect(tick.json, tick.stderr).toMatchObject({ dead: 1 });
  return enqueued.json.job.id as string;
}

describe('single-job commands', () => {
  test('skiplock retry <id> and skiplock cancel <id>; job <id> shows one', async () => {
    const id = await deadJob();
    const retried = await cli(['retry', id]);
    expect(retried.code, retried.stderr).toBe(0);
    expect(retried.json.job).toMatchObject({ id, status: 'QUEUED' });
    const cancelled = await cli(['cancel', id]);
    expect(cancelled.code, cancelled.stderr).toBe(0);
    expect(cancelled.json).toMatchObject({ job: { id, status: 'CANCELLED' }, outcome: 'cancelled' });
    const shown = await cli(['job', id]);
    expect(shown.json.job).toMatchObject({ id, status: 'CANCELLED' });
    // A job in no state for it: the API's conflict, as JSON, exit 1.
    const again = await cli(['cancel', id]);
    expect([again.code, again.json?.error?.code]).toEqual([1, 'conflict']);
    const missing = await cli(['retry', '999999999']);
    expect([missing.code, missing.json?.error?.code]).toEqual([1, 'not_found']);
  });

  test('jobs retry <id>, jobs cancel <id>, jobs restart <id>, jobs <id>: the single-job form beside the filter form', async () => {
    const id = await deadJob();
    const retried = await cli(['jobs', 'retry', id]);
    expect(retried.code, retried.stderr).toBe(0);
    expect(retried.json.job).toMatchObject({ id, status: 'QUEUED' });
    const cancelled = await cli(['jobs', 'cancel', id]);
    expect(cancelled.json).toMatchObject({ job: { id, status: 'CANCELLED' }, outcome: 'cancelled' });
    const restarted = await cli(['jobs', 'restart', id]);
    expect(restarted.json.job).toMatchObject({ id, status: 'QUEUED' });
    expect((await cli(['jobs', id])).json.job).toMatchObject({ id, status: 'QUEUED' });
  });
});

describe('a mistake is one line with a hint', () => {
  const oneLine = async (args: string[], pattern: RegExp, env?: Record<string, string | undefined>) => {
    const result = await cli(args, env);
    expect(result.code, args.join(' ')).toBe(2);
    expect(lines(result.stderr), args.join(' ')).toHaveLength(1);
    expect(result.stderr.trim(), args.join(' ')).toMatch(pattern);
    expect(result.stdout).toBe('');
  };

  test('unknown commands, arguments and options', async () => {
    await oneLine(['frobnicate', '19'], /^skiplock: unknown command "frobnicate" — try: skiplock help$/);
    await oneLine(['retyr', '19'], /^skiplock: unknown command "retyr" \(did you mean retry\?\) — try: skiplock help$/);
    await oneLine(['jobs', 'retry', '19', '20'], /^skiplock: .*one job id.* — try: skiplock help jobs$/);
    await oneLine(['jobs', 'retry', '19', '--task', 'x'], /^skiplock: .*a job id or filters.* — try: skiplock help jobs$/);
    await oneLine(['jobs', 'delete', '19'], /^skiplock: .*delete.*filter.* — try: skiplock help jobs$/);
    await oneLine(['jobs', 'explode'], /^skiplock: .*"explode".* — try: skiplock help jobs$/);
    await oneLine(['retry'], /^skiplock: retry takes <id> — try: skiplock help retry$/);
    await oneLine(['tick', '--bogus'], /^skiplock: unknown option --bogus — try: skiplock help tick$/);
    await oneLine(['jobs', '--limit', 'ten'], /^skiplock: --limit must be an integer, got "ten" — try: skiplock help jobs$/);
    await oneLine(['migrate', 'extra'], /^skiplock: unexpected argument "extra" — try: skiplock help migrate$/);
  });

  test('DATABASE_URL unset: one line saying what to set, even before a command is checked against the database', async () => {
    await oneLine(['jobs'], /^skiplock: DATABASE_URL is not set — .*postgres:\/\//, { DATABASE_URL: undefined });
  });

  test('skiplock help <command> prints that command; bare skiplock and help print the whole usage', async () => {
    const jobs = await cli(['help', 'jobs']);
    expect(jobs.code).toBe(0);
    expect(jobs.stdout).toContain('jobs retry|cancel|restart <id>');
    expect(jobs.stdout).not.toContain('events send');
    const all = await cli(['help']);
    expect(all.stdout).toContain('events send');
    const bare = await cli([]);
    expect(bare.code).toBe(2);
    expect(bare.stderr).toContain('usage: skiplock');
  });
});

test('typeScriptSupport: which Node runs a .ts module, with what', () => {
  const at = (version: string, typescript: unknown, execArgv: string[] = [], nodeOptions?: string) =>
    typeScriptSupport({ version, typescript, execArgv, nodeOptions }).kind;
  expect(at('v20.20.2', undefined)).toBe('none');
  expect(at('v22.5.1', undefined)).toBe('none');
  expect(at('v22.6.0', undefined)).toBe('flag');
  expect(at('v22.12.0', false)).toBe('flag');
  expect(at('v22.12.0', 'strip', ['--experimental-strip-types'])).toBe('native');
  expect(at('v22.7.0', undefined, ['--experimental-strip-types'])).toBe('native');
  expect(at('v22.18.0', 'strip')).toBe('native');
  expect(at('v23.6.0', 'strip')).toBe('native');
  expect(at('v24.21.0', 'strip')).toBe('native');
  expect(at('v24.21.0', false, ['--no-experimental-strip-types'])).toBe('off');
  expect(at('v22.18.0', false, [], '--no-experimental-strip-types')).toBe('off');
});

describe('--tasks <module>, the built CLI under plain node', () => {
  let dir: string;
  let cliJs: string;
  beforeAll(async () => {
    // dist/ as the package ships it (tsc, type checking left to `npm run typecheck`), beside this repository's node_modules.
    dir = await mkdtemp(join(tmpdir(), 'skiplock-cli-'));
    await symlink(join(ROOT, 'node_modules'), join(dir, 'node_modules'), 'dir');
    await writeFile(join(dir, 'package.json'), '{"type": "module"}\n');
    execFileSync(process.execPath, [join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', join(ROOT, 'tsconfig.build.json'), '--outDir', join(dir, 'dist'), '--noCheck', '--declaration', 'false', '--sourceMap', 'false', '--inlineSources', 'false'], { cwd: ROOT, stdio: 'inherit' });
    cliJs = join(dir, 'dist/cli.js');
    const source = (typed: boolean) => [
      `import * as z from 'zod';`,
      `import { defineTask } from './dist/index.js';`,
      typed ? `const name: string = 'shout';` : `const name = 'shout';`,
      `export const tasks = [defineTask({ name, payload: z.object({ text: z.string() }), handler: ({ text }${typed ? ': { text: string }' : ''}) => ({ text: text.toUpperCase() }) })];`,
    ].join('\n');
    await writeFile(join(dir, 'tasks.ts'), source(true));
    await writeFile(join(dir, 'tasks.js'), source(false));
  }, 120_000);
  afterAll(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  test('a .ts module loads under a Node that strips types (this Node, 24)', async () => {
    const result = await run(process.execPath, [cliJs, 'enqueue', 'shout', '{"text":"ts"}', '--tasks', './tasks.ts'], { cwd: dir });
    expect(result.code, result.stderr).toBe(0);
    expect(result.json).toMatchObject({ created: true, job: { task: 'shout', payload: { text: 'ts' } } });
  });

  test('type stripping turned off: one line saying so', async () => {
    const result = await run(process.execPath, ['--no-experimental-strip-types', cliJs, 'tasks', '--tasks', './tasks.ts'], { cwd: dir });
    expect(result.code).toBe(2);
    expect(lines(result.stderr)).toHaveLength(1);
    expect(result.stderr).toMatch(/^skiplock: --tasks \.\/tasks\.ts is TypeScript, and this Node's type stripping is turned off \(--no-experimental-strip-types\): .*compile it/);
  });

  const node20 = ['/usr/bin/node', '/bin/node', '/usr/local/bin/node'].find((path) => {
    if (!existsSync(path)) return false;
    const [major, minor] = execFileSync(path, ['-p', 'process.versions.node'], { encoding: 'utf8' }).trim().split('.').map(Number);
    return major! < 22 || (major === 22 && minor! < 6);
  });

  test.skipIf(!node20)('on a Node that cannot strip types (the machine\'s Node 20): one line saying what to do; a .js module works', async () => {
    const ts = await run(node20!, [cliJs, 'tasks', '--tasks', './tasks.ts'], { cwd: dir });
    expect(ts.code).toBe(2);
    expect(lines(ts.stderr), ts.stderr).toHaveLength(1);
    expect(ts.stderr).toMatch(/^skiplock: --tasks \.\/tasks\.ts is TypeScript, which Node 20\.\d+\.\d+ cannot run: compile it and pass the \.js, run the CLI under tsx .*, or use Node 22\.18 or later/);
    const js = await run(node20!, [cliJs, 'tasks', '--tasks', './tasks.js'], { cwd: dir });
    expect(js.code, js.stderr).toBe(0);
    expect(js.json.tasks.map((t: { name: string }) => t.name)).toContain('shout');
  });
});

test('migrate says why a number is missing from the list (there is no migration 7)', async () => {
  const result = await cli(['migrate']);
  expect(result.code, result.stderr).toBe(0);
  expect([...result.json.applied, ...result.json.alreadyApplied]).not.toContain(7);
  expect(result.json.alreadyApplied).toEqual(expect.arrayContaining([6, 8]));
  expect(result.json.note).toMatch(/^there is no migration 7: never used \(.*006 and 008.*\); the numbers need not be consecutive$/);
});
