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
import { parseArgs } from 'node:util';
import { SkiplockError } from './core/errors.ts';
import { JOB_STATUSES, type JobStatus } from './core/types.ts';
import type { EnqueueInput } from './runtime/tasks/enqueue.ts';
import { createSkiplock, type Skiplock } from './runtime/skiplock.ts';
import type { Task } from './runtime/tasks/task.ts';
import { databaseUrlProblem, describeConnectionError } from './store/drivers/database-url.ts';
import { jobToJson } from './store/rows.ts';
import { migrations } from './store/migrations-data.ts';
import { migrationGapNote } from './store/migrate.ts';
import { taskToJson } from './runtime/operations/tasks.ts';
import { eventToJson } from './runtime/events/events.ts';
import { importTasksModule, rerunWithTypeStripping, TasksModuleError } from './cli/tasks-module.ts';
import { checkDeployment, type DeploymentOptions } from './runtime/wake/deployment.ts';
import { consoleLog, type Logger } from './runtime/observability/log.ts';

const USAGE = `usage: skiplock <command> [options]

commands:
  migrate                          apply pending migrations (safe to run from several places at once);
                                   prints {"applied", "alreadyApplied", "note"} (the note: numbers never used)
  enqueue <task> [payload-json]    enqueue one job; prints {"job", "created"}
      --run-at ISO | --delay-ms N  when it becomes due (default: now)
      --priority N  --max-attempts N  --timeout-ms N  --idempotency-key K
      --debounce-key K --debounce-ms N [--debounce-max-ms N] [--debounce-keep first|last]
                                   debounce: update the QUEUED job of that key instead of adding one
  reschedule <id> [payload-json]   change a QUEUED job; prints {"job"}
      --run-at ISO | --delay-ms N (0: run now)  --priority N
  tasks                            each task's counts by status, paused or active; prints {"tasks"}
  pause <task>                     no tick claims the task's jobs until resumed (schedules keep firing)
  resume <task>                    claim the task's jobs again
  job <id>                         one job; prints {"job"} (also: jobs <id>)
  retry <id>                       a DEAD or CANCELLED job queued again, due now; prints {"job"}
  cancel <id>                      a job not yet finished cancelled (a RUNNING one is asked to stop); prints {"job", "outcome"}
  jobs                             list jobs, newest first; prints {"jobs", "nextCursor"}
      --status S  --task T  --limit N (1-500, default 50)  --cursor C
                                   S: ${JOB_STATUSES.map((s) => s.toLowerCase()).join(', ')} (any case)
  jobs retry|cancel|restart <id>   one job, as retry <id>, cancel <id>, restart <id>
  jobs retry|cancel|restart|delete every job matching the filter, in chunks; prints {"matched", "changed"}
                                   (--dry-run: {"matched", "changed": 0, "wouldChange"})
      --task T  --status S[,S…]  --error-contains E  --created-before ISO  --created-after ISO  --key K
      --from-step S (restart)  --dry-run (count only)
  replay                           replay your tasks' current code against the recorded steps of in-flight jobs
      --task T  --status S[,S…]  --limit N (default 1000)
                                   writes nothing; prints {"checked", "failures"}; exit 1 if any job would fail
  restart <id>                     queue a DEAD or CANCELLED job again from a step, keeping the steps before it;
                                   prints {"job"}; exit 1 with conflict for a live (already restarted) or DONE job
      --from-step S                (default: from the top, every step forgotten)
  events send <name> [data-json]   send an event: wakes its waiters, starts its on: tasks (those it has no --tasks
                                   for are "pending": the deployment that defines them starts them); prints {"event"}
      --key K  --idempotency-key K
  events list                      stored events, newest first; prints {"events", "nextCursor"}
      --name N  --key K  --limit N  --cursor C
  dev                              local PostgreSQL + migrations + Neon proxy for your project (skiplock dev --help)
  tick                             run one tick; prints what it did
      --budget ms                  how long it may run (default 30000)
      --wait                       keep polling for due jobs until the budget ends (default: stop when idle)

options for every command:
  --tasks <module>                 also register the tasks a module exports as \`tasks\` (or default); a .ts
                                   module needs a Node that runs TypeScript (22.6 or later; 22.18+ by itself)
  --url <base-url>                 the deployment that runs the jobs (default: SKIPLOCK_URL), where its /v1/wake is:
                                   with API_TOKEN, a write that makes due work wakes it (POST /v1/wake)
  --help                           this text; skiplock help <command>: that command's part

environment: DATABASE_URL (required); SKIPLOCK_URL and API_TOKEN (the deployment to wake after a write)
exit status: 0 ok, 1 refused or failed (the error as JSON on stderr), 2 a mistake in the command (one line on stderr)`;

/** Every command, for the unknown-command answer and \`skiplock help <command>\`. */
const COMMANDS = ['migrate', 'enqueue', 'reschedule', 'tasks', 'pause', 'resume', 'job', 'retry', 'cancel', 'jobs', 'replay', 'restart', 'events', 'dev', 'tick', 'help'] as const;

class UsageError extends Error {}

const OPTIONS = {
  'run-at': { type: 'string' },
  'delay-ms': { type: 'string' },
  priority: { type: 'string' },
  'max-attempts': { type: 'string' },
  'timeout-ms': { type: 'string' },
  'idempotency-key': { type: 'string' },
  'debounce-key': { type: 'string' },
  'debounce-ms': { type: 'string' },
  'debounce-max-ms': { type: 'string' },
  'debounce-keep': { type: 'string' },
  name: { type: 'string' },
  status: { type: 'string' },
  task: { type: 'string' },
  limit: { type: 'string' },
  cursor: { type: 'string' },
  'error-contains': { type: 'string' },
  'created-before': { type: 'string' },
  'created-after': { type: 'string' },
  key: { type: 'string' },
  'from-step': { type: 'string' },
  'dry-run': { type: 'boolean' },
  budget: { type: 'string' },
  wait: { type: 'boolean' },
  tasks: { type: 'string' },
  url: { type: 'string' },
  help: { type: 'boolean', short: 'h' },
} as const;

type Values = ReturnType<typeof parseArgs<{ options: typeof OPTIONS; allowPositionals: true }>>['values'];

export interface CliOptions {
  /** Tasks registered before those of --tasks (which win by name). Default none. */
  tasks?: readonly Task[];
}

export async function main(argv: readonly string[], options: CliOptions = {}): Promise<number> {
  if (argv[0] === 'dev') return (await import('./dev/consumer-dev.ts')).runDev(argv.slice(1));
  let parsed;
  try {
    parsed = parseArgs({ args: [...argv], options: OPTIONS, allowPositionals: true, strict: true });
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

  // --tasks before the database: a module this Node cannot load is said in one line, before anything runs.
  let tasks = options.tasks ?? [];
  if (values.tasks !== undefined) {
    try {
      const loaded = await importTasksModule(values.tasks);
      if ('rerun' in loaded) return await rerunWithTypeStripping(argv);
      tasks = withModuleTasks(tasks, loaded.exports, values.tasks);
    } catch (error) {
      if (!(error instanceof TasksModuleError || error instanceof UsageError)) throw error;
      process.stderr.write(`skiplock: ${error.message}\n`);
      return 2;
    }
  }

  // The deployment to wake after a write: checked before the database, as a mistake in the command.
  let deployment: DeploymentOptions | undefined;
  const deploymentUrl = values.url ?? (process.env.SKIPLOCK_URL || undefined);
  if (deploymentUrl !== undefined) {
    const flag = values.url !== undefined ? '--url' : 'SKIPLOCK_URL';
    if (!process.env.API_TOKEN) {
      process.stderr.write(`skiplock: ${flag} is set but API_TOKEN is not: set API_TOKEN to the deployment's API token, so the CLI can wake it (POST /v1/wake)\n`);
      return 2;
    }
    try {
      deployment = checkDeployment({ url: deploymentUrl, token: process.env.API_TOKEN });
    } catch (error) {
      process.stderr.write(`skiplock: ${(error as Error).message.replace(/^deployment\.url/, flag).replace(/^deployment\.token/, 'API_TOKEN')}\n`);
      return 2;
    }
  }

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
  } catch (error) {
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
  } finally {
    await sql.close();
  }
}

/** Commands that write jobs (and may make due work): the ones the no-SKIPLOCK_URL line is for. */
function isWriteCommand(command: string, args: readonly string[]): boolean {
  if (['enqueue', 'reschedule', 'resume', 'restart', 'retry', 'cancel'].includes(command)) return true;
  if (command === 'jobs') return ['retry', 'cancel', 'restart'].includes(args[0] ?? '');
  return command === 'events' && args[0] === 'send';
}

/** Without SKIPLOCK_URL: when an idle deployment finds the work this command made due, and how to wake it. */
function unwokenLine(atMs: number): string {
  const when = atMs <= Date.now() + 1_000 ? 'due now' : `due at ${new Date(atMs).toISOString()}`;
  return `skiplock: the work is ${when}, but an idle deployment finds it only at its next safety check (IDLE_CHECK_MS, one hour by default) or cron — to start it on time, set SKIPLOCK_URL (its base URL) and API_TOKEN so the CLI wakes it, or POST /v1/wake to it`;
}

/** The CLI's warnings: a failed wake as one line on stderr; anything else as the library says it. */
const cliLog: Logger = (level, message, fields) => {
  if (!message.startsWith('waking the deployment failed')) return consoleLog(level, message, fields);
  process.stderr.write(`skiplock: waking the deployment at ${String(fields?.url)} failed (${String(fields?.error)}); it finds the work at its next safety check (IDLE_CHECK_MS) or cron\n`);
};

async function run(skiplock: Skiplock, command: string, args: string[], values: Values, woken = false): Promise<unknown> {
  switch (command) {
    case 'migrate': {
      expectArgs(args, 0);
      const result = await skiplock.migrate(migrations);
      // The list skips 7: say why, where the user reads the list.
      const note = migrationGapNote(migrations.map((m) => m.id));
      return note === undefined ? result : { ...result, note };
    }
    case 'enqueue': {
      if (args.length < 1 || args.length > 2) throw new UsageError('enqueue takes <task> and an optional payload (JSON)');
      const input: Record<string, unknown> = { task: args[0], payload: args[1] === undefined ? {} : parseJson(args[1]) };
      if (values['run-at'] !== undefined) input.runAt = values['run-at'];
      if (values['delay-ms'] !== undefined) input.delayMs = integer(values['delay-ms'], '--delay-ms');
      if (values.priority !== undefined) input.priority = integer(values.priority, '--priority');
      if (values['max-attempts'] !== undefined) input.maxAttempts = integer(values['max-attempts'], '--max-attempts');
      if (values['timeout-ms'] !== undefined) input.timeoutMs = integer(values['timeout-ms'], '--timeout-ms');
      if (values['idempotency-key'] !== undefined) input.idempotencyKey = values['idempotency-key'];
      if (values['debounce-key'] !== undefined || values['debounce-ms'] !== undefined) {
        if (values['debounce-key'] === undefined || values['debounce-ms'] === undefined) throw new UsageError('--debounce-key and --debounce-ms go together');
        input.debounce = {
          key: values['debounce-key'],
          delayMs: integer(values['debounce-ms'], '--debounce-ms'),
          ...(values['debounce-max-ms'] !== undefined ? { maxDelayMs: integer(values['debounce-max-ms'], '--debounce-max-ms') } : {}),
          ...(values['debounce-keep'] !== undefined ? { keep: values['debounce-keep'] } : {}),
        };
      }
      const { job, created } = await skiplock.enqueueWithResult(input as EnqueueInput);
      return { job: jobToJson(job), created };
    }
    case 'reschedule': {
      if (args.length < 1 || args.length > 2) throw new UsageError('reschedule takes <id> and an optional payload (JSON)');
      const input: Record<string, unknown> = {};
      if (args[1] !== undefined) input.payload = parseJson(args[1]);
      if (values['run-at'] !== undefined) input.runAt = values['run-at'];
      if (values['delay-ms'] !== undefined) input.delayMs = integer(values['delay-ms'], '--delay-ms');
      if (values.priority !== undefined) input.priority = integer(values.priority, '--priority');
      return { job: jobToJson(await skiplock.rescheduleJob(args[0]!, input)) };
    }
    case 'tasks': {
      expectArgs(args, 0);
      return { tasks: (await skiplock.listTasks()).map(taskToJson) };
    }
    case 'pause':
    case 'resume': {
      if (args.length !== 1) throw new UsageError(`${command} takes <task>`);
      const task = command === 'pause' ? await skiplock.pauseTask(args[0]!) : await skiplock.resumeTask(args[0]!);
      return { task: taskToJson(task) };
    }
    case 'job': {
      if (args.length !== 1) throw new UsageError('job takes <id>');
      return showJob(skiplock, args[0]!);
    }
    case 'retry':
    case 'cancel': {
      if (args.length !== 1) throw new UsageError(`${command} takes <id>`);
      return oneJob(skiplock, command, args[0]!, values);
    }
    case 'jobs': {
      if (args.length > 0) return jobsWith(skiplock, args, values);
      const status = values.status?.toUpperCase();
      if (status !== undefined && !(JOB_STATUSES as readonly string[]).includes(status))
        throw new UsageError(`--status must be one of ${JOB_STATUSES.join(', ')}`);
      const page = await skiplock.listJobs({
        ...(status ? { status: status as JobStatus } : {}),
        ...(values.task !== undefined ? { task: values.task } : {}),
        ...(values.limit !== undefined ? { limit: integer(values.limit, '--limit') } : {}),
        ...(values.cursor !== undefined ? { cursor: values.cursor } : {}),
      });
      return { jobs: page.jobs.map(jobToJson), nextCursor: page.nextCursor };
    }
    case 'replay': {
      expectArgs(args, 0);
      if (values.tasks === undefined && skiplock.tasks.size === 0) throw new UsageError('replay needs --tasks <module>: the code to check');
      return skiplock.checkReplay({
        ...(values.task !== undefined ? { task: values.task } : {}),
        ...(values.status !== undefined ? { status: values.status.split(',').map((s) => s.trim()) } : {}),
        ...(values.limit !== undefined ? { limit: integer(values.limit, '--limit') } : {}),
      });
    }
    case 'restart': {
      if (args.length !== 1) throw new UsageError('restart takes <id>');
      return oneJob(skiplock, 'restart', args[0]!, values);
    }
    case 'events':
      return runEvents(skiplock, args, values, woken);
    case 'tick': {
      expectArgs(args, 0);
      const budgetMs = values.budget === undefined ? 30_000 : integer(values.budget, '--budget');
      if (budgetMs < 1) throw new UsageError('--budget must be a positive number of ms');
      // Ctrl-C stops claiming and lets running handlers finish or be released.
      const stop = new AbortController();
      const onSignal = () => stop.abort();
      process.once('SIGINT', onSignal);
      process.once('SIGTERM', onSignal);
      try {
        return await skiplock.tick({ budgetMs, untilIdle: !values.wait, signal: stop.signal, drainMs: Math.min(10_000, budgetMs) });
      } finally {
        process.off('SIGINT', onSignal);
        process.off('SIGTERM', onSignal);
      }
    }
    default:
      throw new UsageError(`unknown command ${JSON.stringify(command)}`);
  }
}

const BULK_ACTIONS = ['retry', 'cancel', 'restart', 'delete'] as const;
const FILTERS = ['task', 'status', 'error-contains', 'created-before', 'created-after', 'key', 'dry-run'] as const;

/** `jobs <id>`, `jobs <action> <id>` (one job) or `jobs <action> --filters…` (bulk). */
async function jobsWith(skiplock: Skiplock, args: string[], values: Values): Promise<unknown> {
  const [action, ...ids] = args as [string, ...string[]];
  if (args.length === 1 && /^\d+$/.test(action)) return showJob(skiplock, action);
  if (!(BULK_ACTIONS as readonly string[]).includes(action))
    throw new UsageError(`jobs takes no argument, a job id, or one of ${BULK_ACTIONS.join(', ')}; got ${JSON.stringify(action)}`);
  if (ids.length === 0) return bulk(skiplock, action as (typeof BULK_ACTIONS)[number], values);
  if (ids.length > 1) throw new UsageError(`jobs ${action} takes one job id at a time, or filters (--task, --status, …)`);
  if (action === 'delete') throw new UsageError('jobs delete works on a filter (--task, --status, …), not on a job id');
  if (FILTERS.some((name) => values[name] !== undefined)) throw new UsageError(`jobs ${action} takes a job id or filters (--task, --status, …), not both`);
  return oneJob(skiplock, action as 'retry' | 'cancel' | 'restart', ids[0]!, values);
}

/** One job's retry, cancel or restart, as the HTTP API's POST /v1/jobs/:id/<action>. */
async function oneJob(skiplock: Skiplock, action: 'retry' | 'cancel' | 'restart', id: string, values: Values): Promise<unknown> {
  if (action === 'cancel') {
    const { job, outcome } = await skiplock.cancelJob(id);
    return { job: jobToJson(job), outcome };
  }
  if (action === 'retry') return { job: jobToJson(await skiplock.retryJob(id)) };
  return { job: jobToJson(await skiplock.restartJob(id, { fromStep: values['from-step'] ?? null })) };
}

async function showJob(skiplock: Skiplock, id: string): Promise<unknown> {
  const job = await skiplock.getJob(id);
  if (!job) throw new SkiplockError('not_found', `no job ${JSON.stringify(id)}`);
  return { job: jobToJson(job) };
}

/** `jobs <action> --filters…`: skiplock.bulk (docs/operations.md, "Bulk operations"). */
async function bulk(skiplock: Skiplock, action: (typeof BULK_ACTIONS)[number], values: Values) {
  const where: Record<string, unknown> = {};
  if (values.task !== undefined) where.task = values.task;
  if (values.status !== undefined) where.status = values.status.split(',').map((s) => s.trim());
  if (values['error-contains'] !== undefined) where.errorContains = values['error-contains'];
  if (values['created-before'] !== undefined) where.createdBefore = values['created-before'];
  if (values['created-after'] !== undefined) where.createdAfter = values['created-after'];
  if (values.key !== undefined) where.key = values.key;
  return skiplock.bulk({
    action,
    where,
    ...(values['dry-run'] ? { dryRun: true } : {}),
    ...(values['from-step'] !== undefined ? { fromStep: values['from-step'] } : {}),
  });
}

/** The given tasks, plus those the --tasks module exports; the latter win by name. */
function withModuleTasks(given: readonly Task[], module: Record<string, unknown>, modulePath: string): readonly Task[] {
  const own = module.tasks ?? module.default;
  if (!Array.isArray(own)) throw new UsageError(`${modulePath} must export an array of tasks as \`tasks\` or as its default export`);
  const names = new Set((own as Task[]).map((task) => task.name));
  return [...given.filter((task) => !names.has(task.name)), ...(own as Task[])];
}

function expectArgs(args: readonly string[], n: number): void {
  if (args.length !== n) throw new UsageError(`unexpected argument ${JSON.stringify(args[n])}`);
}

function integer(text: string, flag: string): number {
  if (!/^-?\d{1,16}$/.test(text)) throw new UsageError(`${flag} must be an integer, got ${JSON.stringify(text)}`);
  return Number(text);
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    throw new SkiplockError('invalid_json', `the payload is not valid JSON: ${text.length > 60 ? `${text.slice(0, 60)}…` : text}`);
  }
}

/** A mistake in the command: one line with a hint, exit status 2. */
function mistake(message: string, command?: string): number {
  const topic = command !== undefined && (COMMANDS as readonly string[]).includes(command) && command !== 'help' ? ` ${command}` : '';
  process.stderr.write(`skiplock: ${message} — try: skiplock help${topic}\n`);
  return 2;
}

/** parseArgs' errors, shortened to what the user typed. */
function parseProblem(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  const code = (error as { code?: unknown }).code;
  const option = /'(-[^' ]+)/.exec(message)?.[1];
  if (code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION' && option) return `unknown option ${option}`;
  if (code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE' && option)
    return message.includes('does not take an argument') ? `${option} takes no value` : `${option} needs a value`;
  return message.split('\n')[0]!;
}

/** `skiplock help <command>`: the usage lines of that command (the whole usage for anything else). */
function helpFor(command: string | undefined): string {
  if (command === undefined || command === 'help' || !(COMMANDS as readonly string[]).includes(command)) return USAGE;
  const lines = USAGE.split('\n');
  const from = lines.indexOf('commands:') + 1;
  const entries: string[] = [];
  let keep = false;
  for (const line of lines.slice(from)) {
    if (line === '') break;
    const name = /^ {2}(\S+)/.exec(line)?.[1];
    if (name !== undefined) keep = name === command;
    if (keep) entries.push(line);
  }
  const common = lines.slice(lines.indexOf('options for every command:'));
  return [`usage: skiplock ${command} …`, '', ...entries, '', ...common].join('\n');
}

/** ` (did you mean retry?)` for a command one or two edits away from one. */
function didYouMean(command: string): string {
  const close = COMMANDS.filter((known) => editDistance(command.toLowerCase(), known) <= 2).sort((a, b) => editDistance(command, a) - editDistance(command, b))[0];
  return close === undefined ? '' : ` (did you mean ${close}?)`;
}

function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++)
      current[j] = Math.min(previous[j]! + 1, current[j - 1]! + 1, previous[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    previous = current;
  }
  return previous[b.length]!;
}

if (process.argv[1] !== undefined && realpathSync(process.argv[1]) === fileURLToPath(import.meta.url)) {
  process.exitCode = await main(process.argv.slice(2));
}

/** `events send <name> [data-json]` and `events list`. */
async function runEvents(skiplock: Skiplock, args: string[], values: Values, woken: boolean): Promise<unknown> {
  const [sub, ...rest] = args;
  if (sub === 'send') {
    if (rest.length < 1 || rest.length > 2) throw new UsageError('events send takes <name> and an optional data (JSON)');
    let data: unknown;
    if (rest[1] !== undefined) {
      try {
        data = JSON.parse(rest[1]);
      } catch {
        throw new UsageError('the data must be JSON');
      }
    }
    const { created, ...event } = await skiplock.sendEvent({
      name: rest[0]!,
      ...(values.key !== undefined && { key: values.key }),
      ...(data !== undefined && { data }),
      ...(values['idempotency-key'] !== undefined && { idempotencyKey: values['idempotency-key'] }),
    });
    // Tasks another deployment defines with on: this name: that deployment starts their jobs, not this CLI.
    if (created && event.pending > 0 && !woken)
      process.stderr.write(
        `skiplock: ${event.pending} on: job${event.pending === 1 ? '' : 's'} of this event ${event.pending === 1 ? 'is' : 'are'} pending: the deployment that registered ${event.pending === 1 ? 'its task' : 'their tasks'} starts ${event.pending === 1 ? 'it' : 'them'} at its next tick (to tick now: set SKIPLOCK_URL and API_TOKEN so the CLI wakes it, or POST /v1/wake on it)\n`,
      );
    return { event, created };
  }
  if (sub === 'list') {
    expectArgs(rest, 0);
    const page = await skiplock.listEvents({
      ...(values.name !== undefined && { name: values.name }),
      ...(values.key !== undefined && { key: values.key }),
      ...(values.limit !== undefined && { limit: integer(values.limit, '--limit') }),
      ...(values.cursor !== undefined && { cursor: values.cursor }),
    });
    return { events: page.events.map(eventToJson), nextCursor: page.nextCursor };
  }
  throw new UsageError('events takes send or list');
}
