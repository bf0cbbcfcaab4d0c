#!/usr/bin/env node
/**
 * The skiplock CLI (`npx skiplock`, the package's bin), for scripts and deploy pipelines. It talks
 * to DATABASE_URL with the pg driver, over the same core as the HTTP API, and prints JSON on
 * stdout. `migrate` applies the migrations this package ships (as data: no file lookup). It
 * registers no tasks by itself: `--tasks <module>` names yours (enqueue validates against them);
 * a project passes its own to `main(argv, { tasks })` (this repository: src/app/cli.ts).
 *
 *   skiplock migrate
 *   skiplock enqueue <task> [payload-json] [--run-at ISO | --delay-ms N] [--priority N] [--idempotency-key K]
 *   skiplock jobs [--status S] [--task T] [--limit N] [--cursor C]
 *   skiplock tick [--budget ms] [--wait]
 *   skiplock jobs retry|cancel|restart|delete --task T --status dead --error-contains E [--dry-run]
 *   skiplock retry <id> | cancel <id> | restart <id> [--from-step S] | job <id>   (also jobs retry|cancel|restart <id>)
 *   skiplock events send <name> [data-json] [--key K] [--idempotency-key K]
 *
 * A mistake (an unknown command, argument or option) is one line on stderr with a hint
 * (`skiplock: unknown command "x" — try: skiplock help`), exit status 2; `skiplock help <command>`
 * prints that command's part of the usage.
 */
import { realpathSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { SkiplockError } from './core/errors.ts';
import { createSkiplock } from './runtime/skiplock.ts';
import type { Task } from './runtime/tasks/index.ts';
import type { DeploymentOptions } from './runtime/wake/index.ts';
import { databaseUrlProblem, describeConnectionError } from './store/drivers/database-url.ts';
import type { Sql } from './store/sql.ts';
import { parseCommandLine, parseProblem, UsageError, type Values } from './cli/args.ts';
import { run } from './cli/commands.ts';
import { importTasksModule, rerunWithTypeStripping, TasksModuleError } from './cli/tasks-module.ts';
import { COMMANDS, didYouMean, helpFor, mistake, USAGE } from './cli/usage.ts';
import { cliLog, deploymentOption, isWriteCommand, unwokenLine } from './cli/wake.ts';

export interface CliOptions {
  /** Tasks registered before those of --tasks (which win by name). Default none. */
  tasks?: readonly Task[];
}

/** A command to run: its name, its arguments and the options given. */
interface Command {
  command: string;
  rest: string[];
  values: Values;
}

/**
 * Runs the CLI on `argv`; resolves to the exit status. Each check before the database has its
 * own function, which writes its one line and answers the exit status (a number) when it fails.
 */
export async function main(argv: readonly string[], options: CliOptions = {}): Promise<number> {
  if (argv[0] === 'dev') return (await import('./dev/consumer-dev.ts')).runDev(argv.slice(1));
  const parsed = parseCommand(argv);
  if (typeof parsed === 'number') return parsed;
  // --tasks before the database: a module this Node cannot load is said in one line, before anything runs.
  const tasks = await loadTasks(argv, parsed.values, options.tasks ?? []);
  if (typeof tasks === 'number') return tasks;
  // The deployment to wake after a write: checked before the database, as a mistake in the command.
  const deployment = deploymentOption(parsed.values);
  if (typeof deployment === 'number') return deployment;
  const url = databaseUrl();
  if (typeof url === 'number') return url;

  // pg is an optional peer (a Worker project has none): loaded here, so that --help and `dev` work without it.
  const pgDriver = await import('./store/drivers/pg.ts').catch((error: unknown) => {
    if ((error as NodeJS.ErrnoException).code === 'ERR_MODULE_NOT_FOUND' && String(error).includes("'pg'")) return undefined;
    throw error;
  });
  if (!pgDriver) {
    process.stderr.write('skiplock: this command needs the pg package: npm install pg\n');
    return 1;
  }
  const sql = pgDriver.createPgDriver(url, { max: 2 });
  try {
    return await runAndPrint(sql, tasks, deployment, parsed);
  } catch (error) {
    return failure(error, parsed, url);
  } finally {
    await sql.close();
  }
}

/** The command line: the command to run, or the exit status of --help, `help`, bare `skiplock` or a mistake. */
function parseCommand(argv: readonly string[]): Command | number {
  let parsed;
  try {
    parsed = parseCommandLine(argv);
  } catch (error) {
    return mistake(parseProblem(error), argv.find((a) => !a.startsWith('-')));
  }
  const { values, positionals } = parsed;
  const [command, ...rest] = positionals;
  if (values.help || command === 'help') {
    process.stdout.write(`${helpFor(command === 'help' ? rest[0] : command)}\n`);
    return 0;
  }
  if (command === undefined) {
    process.stderr.write(`${USAGE}\n`);
    return 2;
  }
  if (!(COMMANDS as readonly string[]).includes(command)) return mistake(`unknown command ${JSON.stringify(command)}${didYouMean(command)}`);
  return { command, rest, values };
}

/** The given tasks and those of --tasks; or the exit status of a module that cannot be loaded (or of the rerun that strips types). */
async function loadTasks(argv: readonly string[], values: Values, given: readonly Task[]): Promise<readonly Task[] | number> {
  if (values.tasks === undefined) return given;
  try {
    const loaded = await importTasksModule(values.tasks);
    if ('rerun' in loaded) return await rerunWithTypeStripping(argv);
    return withModuleTasks(given, loaded.exports, values.tasks);
  } catch (error) {
    if (!(error instanceof TasksModuleError || error instanceof UsageError)) throw error;
    process.stderr.write(`skiplock: ${error.message}\n`);
    return 2;
  }
}

/** DATABASE_URL, or the exit status of its absence or of a problem with it (one line each). */
function databaseUrl(): string | number {
  const url = process.env.DATABASE_URL;
  if (!url) {
    process.stderr.write('skiplock: DATABASE_URL is not set — set it to your database\'s connection string (postgres://user:password@host:port/database; `npx skiplock dev` prints one for a local database)\n');
    return 2;
  }
  const problem = databaseUrlProblem(url);
  if (problem) {
    process.stderr.write(`skiplock: ${problem}\n`);
    return 2;
  }
  return url;
}

/** Runs the command and prints its answer as JSON, then the line about waking the deployment, if it is due. */
async function runAndPrint(sql: Sql, tasks: readonly Task[], deployment: DeploymentOptions | undefined, { command, rest, values }: Command): Promise<number> {
  const skiplock = createSkiplock({ sql, tasks, log: cliLog, ...(deployment && { deployment }) });
  // When the write made due work (the hook every such write calls), and for when.
  let dueAtMs: number | null = null;
  skiplock.setWakeDriver({ onDueWork: (atMs) => void (dueAtMs = dueAtMs === null ? atMs : Math.min(dueAtMs, atMs)) });
  const output = await run(skiplock, command, rest, values, deployment !== undefined);
  process.stdout.write(`${JSON.stringify(output, null, 2)}\n`);
  // (events send with pending on: jobs has said it already, in its own line.)
  const saidPending = command === 'events' && ((output as { event?: { pending?: number } }).event?.pending ?? 0) > 0;
  if (dueAtMs !== null && !deployment && !saidPending && isWriteCommand(command, rest)) process.stderr.write(`${unwokenLine(dueAtMs)}\n`);
  // The replay check is for CI: a job the new code would fail fails the step.
  if (command === 'replay' && (output as { failures: unknown[] }).failures.length > 0) return 1;
  return 0;
}

/** A command that failed: a mistake in it (exit 2), or the error as JSON or one line on stderr (exit 1). */
function failure(error: unknown, { command, values }: Command, url: string): number {
  if (error instanceof UsageError) return mistake(error.message, command);
  if (error instanceof SkiplockError) {
    const { code, issues } = error;
    // The usual first mistake: the CLI knows only the tasks it is given.
    const message = code === 'unknown_task' && values.tasks === undefined
      ? `${error.message}: no --tasks given; pass --tasks <module> (a module exporting your tasks as \`tasks\`) to register them`
      : error.message;
    process.stderr.write(`${JSON.stringify({ error: { code, message, ...(issues ? { issues } : {}) } })}\n`);
  } else process.stderr.write(`skiplock: ${describeConnectionError(error, url) ?? (error instanceof Error ? error.message : String(error))}\n`);
  return 1;
}

/** The given tasks, plus those the --tasks module exports; the latter win by name. */
function withModuleTasks(given: readonly Task[], module: Record<string, unknown>, modulePath: string): readonly Task[] {
  const own = module.tasks ?? module.default;
  if (!Array.isArray(own)) throw new UsageError(`${modulePath} must export an array of tasks as \`tasks\` or as its default export`);
  const names = new Set((own as Task[]).map((task) => task.name));
  return [...given.filter((task) => !names.has(task.name)), ...(own as Task[])];
}

if (process.argv[1] !== undefined && realpathSync(process.argv[1]) === fileURLToPath(import.meta.url)) {
  process.exitCode = await main(process.argv.slice(2));
}
