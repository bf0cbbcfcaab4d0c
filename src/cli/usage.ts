/**
 * The CLI's words to a user: the usage text, the list of commands, `skiplock help <command>` (that
 * command's part of the usage), and the one line a mistake gets, with its hint (and a "did you
 * mean" for a command one or two edits away from one).
 */
import { JOB_STATUSES } from '../core/types.ts';

export const USAGE = `usage: skiplock <command> [options]

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
export const COMMANDS = ['migrate', 'enqueue', 'reschedule', 'tasks', 'pause', 'resume', 'job', 'retry', 'cancel', 'jobs', 'replay', 'restart', 'events', 'dev', 'tick', 'help'] as const;

/** A mistake in the command: one line with a hint, exit status 2. */
export function mistake(message: string, command?: string): number {
  const topic = command !== undefined && (COMMANDS as readonly string[]).includes(command) && command !== 'help' ? ` ${command}` : '';
  process.stderr.write(`skiplock: ${message} — try: skiplock help${topic}\n`);
  return 2;
}

/** `skiplock help <command>`: the usage lines of that command (the whole usage for anything else). */
export function helpFor(command: string | undefined): string {
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
export function didYouMean(command: string): string {
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
