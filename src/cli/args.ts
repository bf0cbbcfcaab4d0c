/**
 * The CLI's arguments: the options every command shares (parseArgs' table), the mistakes in a
 * command (UsageError: one line on stderr, exit status 2) and the small readers of a command's
 * arguments (a count, an integer, a JSON payload).
 */
import { parseArgs } from 'node:util';
import { SkiplockError } from '../core/errors.ts';

/** A mistake in the command (src/cli/usage.ts mistake): one line with a hint, exit status 2. */
export class UsageError extends Error {}

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

export type Values = ReturnType<typeof parseArgs<{ options: typeof OPTIONS; allowPositionals: true }>>['values'];

/** The command line, parsed against OPTIONS (strict: an unknown option throws; parseProblem says it). */
export function parseCommandLine(argv: readonly string[]) {
  return parseArgs({ args: [...argv], options: OPTIONS, allowPositionals: true, strict: true });
}

/** parseArgs' errors, shortened to what the user typed. */
export function parseProblem(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  const code = (error as { code?: unknown }).code;
  const option = /'(-[^' ]+)/.exec(message)?.[1];
  if (code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION' && option) return `unknown option ${option}`;
  if (code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE' && option)
    return message.includes('does not take an argument') ? `${option} takes no value` : `${option} needs a value`;
  return message.split('\n')[0]!;
}

export function expectArgs(args: readonly string[], n: number): void {
  if (args.length !== n) throw new UsageError(`unexpected argument ${JSON.stringify(args[n])}`);
}

export function integer(text: string, flag: string): number {
  if (!/^-?\d{1,16}$/.test(text)) throw new UsageError(`${flag} must be an integer, got ${JSON.stringify(text)}`);
  return Number(text);
}

export function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    throw new SkiplockError('invalid_json', `the payload is not valid JSON: ${text.length > 60 ? `${text.slice(0, 60)}…` : text}`);
  }
}
