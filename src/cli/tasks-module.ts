/**
 * `--tasks <module>`: the user's tasks, from a .js module or, where this Node can run it, a .ts
 * one (docs/steps.md recommends `npx skiplock replay --tasks ./src/tasks.ts` in CI).
 *
 * - Node 22.18+ and 23.6+ strip types by default (`process.features.typescript`): the import
 *   just works. So does any Node under a loader that handles .ts (tsx's `--import tsx`).
 * - Node 22.6–22.17 and 23.0–23.5 can, with `--experimental-strip-types`: the CLI runs itself
 *   again with that flag (rerunWithTypeStripping), once.
 * - Before 22.6 (Node 20), or with type stripping turned off, nothing can: one line says what to
 *   do (compile it, run the CLI under tsx, or a newer Node).
 */
import { spawn } from 'node:child_process';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

/** Why a module could not be loaded: one line for the user, exit status 2. */
export class TasksModuleError extends Error {}

/** The extensions Node's type stripping runs (.tsx is not among them). */
const TYPESCRIPT = /\.[cm]?ts$/i;
const STRIP_FLAG = '--experimental-strip-types';
const TURNED_OFF = ['--no-experimental-strip-types', '--no-strip-types'];
/** Set in the environment of the run with STRIP_FLAG, so that it never runs itself again. */
const RERUN_MARK = 'SKIPLOCK_CLI_TYPE_STRIPPING';

export type TypeScriptSupport =
  /** This Node runs .ts modules now (by default, or given the flag). */
  | { kind: 'native' }
  /** It can with STRIP_FLAG (22.6–22.17, 23.0–23.5). */
  | { kind: 'flag' }
  /** It could, but type stripping was turned off (the flag that did it). */
  | { kind: 'off'; flag: string }
  /** It cannot (before 22.6). */
  | { kind: 'none' };

export interface NodeFacts {
  /** process.version */
  version: string;
  /** process.features.typescript ('strip', 'transform', false; absent before 22.10) */
  typescript: unknown;
  execArgv: readonly string[];
  /** NODE_OPTIONS */
  nodeOptions: string | undefined;
}

export function typeScriptSupport({ version, typescript, execArgv, nodeOptions }: NodeFacts): TypeScriptSupport {
  const flags = [...execArgv, ...(nodeOptions ?? '').split(/\s+/)];
  const off = flags.find((flag) => TURNED_OFF.includes(flag));
  if (off) return { kind: 'off', flag: off };
  if (typescript || flags.includes(STRIP_FLAG) || flags.includes('--experimental-transform-types')) return { kind: 'native' };
  const [major = 0, minor = 0] = version.replace(/^v/, '').split('.').map(Number);
  return major > 22 || (major === 22 && minor >= 6) ? { kind: 'flag' } : { kind: 'none' };
}

const currentNode = (): NodeFacts => ({
  version: process.version,
  typescript: (process.features as { typescript?: unknown }).typescript,
  execArgv: process.execArgv,
  nodeOptions: process.env.NODE_OPTIONS,
});

/** What a user does where Node cannot run TypeScript. */
const WHAT_TO_DO = `compile it and pass the .js, run the CLI under tsx (NODE_OPTIONS='--import tsx' npx skiplock …), or use Node 22.18 or later`;

export type LoadedModule = { exports: Record<string, unknown> } | { rerun: true };

/**
 * Imports the module named by --tasks. `{ rerun: true }`: this Node can run it only with
 * STRIP_FLAG; call rerunWithTypeStripping. A module that cannot be loaded throws TasksModuleError.
 */
export async function importTasksModule(path: string): Promise<LoadedModule> {
  const typescript = TYPESCRIPT.test(path);
  try {
    return { exports: (await import(pathToFileURL(resolve(path)).href)) as Record<string, unknown> };
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    const message = firstLine(error);
    if (typescript && code === 'ERR_UNKNOWN_FILE_EXTENSION') {
      const support = typeScriptSupport(currentNode());
      if (support.kind === 'flag' && process.env[RERUN_MARK] === undefined) return { rerun: true };
      if (support.kind === 'off')
        throw new TasksModuleError(`--tasks ${path} is TypeScript, and this Node's type stripping is turned off (${support.flag}): drop that flag, or ${WHAT_TO_DO}`);
      throw new TasksModuleError(`--tasks ${path} is TypeScript, which Node ${process.versions.node} cannot run: ${WHAT_TO_DO}`);
    }
    if (code === 'ERR_MODULE_NOT_FOUND' && message.includes(resolve(path)))
      throw new TasksModuleError(`--tasks ${path}: no such file (${resolve(path)})`);
    if (typescript && code === 'ERR_MODULE_NOT_FOUND')
      throw new TasksModuleError(`--tasks ${path}: ${message} (Node runs a .ts file as written: an import of './x.js' needs x.js itself; import './x.ts', or ${WHAT_TO_DO.replace(', or use Node 22.18 or later', '')})`);
    if (typeof code === 'string' && code.startsWith('ERR_UNSUPPORTED_') && typescript)
      throw new TasksModuleError(`--tasks ${path}: ${message} (Node's type stripping cannot run enums, namespaces or parameter properties, nor .ts under node_modules: compile it, or run the CLI under tsx)`);
    throw new TasksModuleError(`--tasks ${path}: ${message}`);
  }
}

/**
 * Runs this CLI again in a child Node with STRIP_FLAG (same script, arguments, terminal) and
 * resolves with its exit status. Ctrl-C reaches the child from the terminal; a SIGTERM sent to
 * this process alone is passed on.
 */
export function rerunWithTypeStripping(argv: readonly string[]): Promise<number> {
  const script = process.argv[1]!;
  const child = spawn(process.execPath, [...process.execArgv, STRIP_FLAG, '--disable-warning=ExperimentalWarning', script, ...argv], {
    stdio: 'inherit',
    env: { ...process.env, [RERUN_MARK]: '1' },
  });
  // The terminal's Ctrl-C reaches the child itself (one process group): here it only must not end this process first.
  const onInt = () => {};
  const onTerm = () => child.kill('SIGTERM');
  process.on('SIGINT', onInt);
  process.on('SIGTERM', onTerm);
  return new Promise((done) => {
    child.once('error', (error) => {
      process.stderr.write(`skiplock: could not run Node again with ${STRIP_FLAG}: ${error.message}\n`);
      done(1);
    });
    child.once('exit', (code, signal) => {
      process.off('SIGINT', onInt);
      process.off('SIGTERM', onTerm);
      done(code ?? (signal ? 128 + (signalNumber(signal) ?? 0) : 1));
    });
  });
}

function signalNumber(signal: NodeJS.Signals): number | undefined {
  return ({ SIGINT: 2, SIGTERM: 15, SIGKILL: 9, SIGHUP: 1 } as Record<string, number>)[signal];
}

function firstLine(error: unknown): string {
  const text = error instanceof Error ? error.message : String(error);
  return text.split('\n')[0]!.trim();
}
