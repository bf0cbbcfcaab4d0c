/**
 * The CLI's command table: `run` sends each command to the function that does it and answers what
 * the CLI prints (as JSON). The commands on jobs are in src/cli/jobs.ts, `events` in
 * src/cli/events.ts; the rest — migrate, enqueue, reschedule, tasks, pause/resume, replay, tick —
 * are here.
 */
import type { EnqueueInput } from '../runtime/tasks/index.ts';
import type { Skiplock } from '../runtime/skiplock.ts';
import { taskToJson } from '../runtime/operations/index.ts';
import { jobToJson } from '../store/rows.ts';
import { migrations } from '../store/migrations-data.ts';
import { migrationGapNote } from '../store/migrate.ts';
import { expectArgs, integer, parseJson, UsageError, type Values } from './args.ts';
import { runEvents } from './events.ts';
import { jobsWith, listJobs, oneJob, showJob } from './jobs.ts';

/** Runs one command (`woken`: a deployment is woken after a write); answers what the CLI prints. */
export async function run(skiplock: Skiplock, command: string, args: string[], values: Values, woken = false): Promise<unknown> {
  switch (command) {
    case 'migrate':
      return migrate(skiplock, args);
    case 'enqueue':
      return enqueue(skiplock, args, values);
    case 'reschedule':
      return reschedule(skiplock, args, values);
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
    case 'jobs':
      return args.length > 0 ? jobsWith(skiplock, args, values) : listJobs(skiplock, values);
    case 'replay':
      return replay(skiplock, args, values);
    case 'restart': {
      if (args.length !== 1) throw new UsageError('restart takes <id>');
      return oneJob(skiplock, 'restart', args[0]!, values);
    }
    case 'events':
      return runEvents(skiplock, args, values, woken);
    case 'tick':
      return tick(skiplock, args, values);
    default:
      throw new UsageError(`unknown command ${JSON.stringify(command)}`);
  }
}

/** `migrate`: the migrations this package ships, applied; with the note on the numbers never used. */
async function migrate(skiplock: Skiplock, args: string[]): Promise<unknown> {
  expectArgs(args, 0);
  const result = await skiplock.migrate(migrations);
  // The list skips 7: say why, where the user reads the list.
  const note = migrationGapNote(migrations.map((m) => m.id));
  return note === undefined ? result : { ...result, note };
}

/** `enqueue <task> [payload-json]` with its options (debounce included). */
async function enqueue(skiplock: Skiplock, args: string[], values: Values): Promise<unknown> {
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

/** `reschedule <id> [payload-json]`: a QUEUED job changed. */
async function reschedule(skiplock: Skiplock, args: string[], values: Values): Promise<unknown> {
  if (args.length < 1 || args.length > 2) throw new UsageError('reschedule takes <id> and an optional payload (JSON)');
  const input: Record<string, unknown> = {};
  if (args[1] !== undefined) input.payload = parseJson(args[1]);
  if (values['run-at'] !== undefined) input.runAt = values['run-at'];
  if (values['delay-ms'] !== undefined) input.delayMs = integer(values['delay-ms'], '--delay-ms');
  if (values.priority !== undefined) input.priority = integer(values.priority, '--priority');
  return { job: jobToJson(await skiplock.rescheduleJob(args[0]!, input)) };
}

/** `replay`: the tasks' current code against the recorded steps of in-flight jobs (writes nothing). */
async function replay(skiplock: Skiplock, args: string[], values: Values): Promise<unknown> {
  expectArgs(args, 0);
  if (values.tasks === undefined && skiplock.tasks.size === 0) throw new UsageError('replay needs --tasks <module>: the code to check');
  return skiplock.checkReplay({
    ...(values.task !== undefined ? { task: values.task } : {}),
    ...(values.status !== undefined ? { status: values.status.split(',').map((s) => s.trim()) } : {}),
    ...(values.limit !== undefined ? { limit: integer(values.limit, '--limit') } : {}),
  });
}

/** `tick`: one tick within --budget (until idle, or polling to the end with --wait); Ctrl-C drains it. */
async function tick(skiplock: Skiplock, args: string[], values: Values): Promise<unknown> {
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
