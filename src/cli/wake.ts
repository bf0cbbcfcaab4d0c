/**
 * The CLI and the deployment that runs the jobs: `--url` / SKIPLOCK_URL with API_TOKEN, checked
 * before anything runs, so that a write that makes due work wakes it (POST /v1/wake); without
 * them, the line that says when an idle deployment finds the work and how to wake it; and a failed
 * wake said in one line.
 */
import { checkDeployment, type DeploymentOptions } from '../runtime/wake/index.ts';
import { consoleLog, type Logger } from '../runtime/observability/index.ts';
import type { Values } from './args.ts';

/**
 * The deployment to wake after a write (`--url`, else SKIPLOCK_URL; undefined: neither), checked
 * as a mistake in the command: a problem is one line on stderr and the exit status 2 (a number).
 */
export function deploymentOption(values: Values): DeploymentOptions | undefined | number {
  const deploymentUrl = values.url ?? (process.env.SKIPLOCK_URL || undefined);
  if (deploymentUrl === undefined) return undefined;
  const flag = values.url !== undefined ? '--url' : 'SKIPLOCK_URL';
  if (!process.env.API_TOKEN) {
    process.stderr.write(`skiplock: ${flag} is set but API_TOKEN is not: set API_TOKEN to the deployment's API token, so the CLI can wake it (POST /v1/wake)\n`);
    return 2;
  }
  try {
    return checkDeployment({ url: deploymentUrl, token: process.env.API_TOKEN });
  } catch (error) {
    process.stderr.write(`skiplock: ${(error as Error).message.replace(/^deployment\.url/, flag).replace(/^deployment\.token/, 'API_TOKEN')}\n`);
    return 2;
  }
}

/** Commands that write jobs (and may make due work): the ones the no-SKIPLOCK_URL line is for. */
export function isWriteCommand(command: string, args: readonly string[]): boolean {
  if (['enqueue', 'reschedule', 'resume', 'restart', 'retry', 'cancel'].includes(command)) return true;
  if (command === 'jobs') return ['retry', 'cancel', 'restart'].includes(args[0] ?? '');
  return command === 'events' && args[0] === 'send';
}

/** Without SKIPLOCK_URL: when an idle deployment finds the work this command made due, and how to wake it. */
export function unwokenLine(atMs: number): string {
  const when = atMs <= Date.now() + 1_000 ? 'due now' : `due at ${new Date(atMs).toISOString()}`;
  return `skiplock: the work is ${when}, but an idle deployment finds it only at its next safety check (IDLE_CHECK_MS, one hour by default) or cron — to start it on time, set SKIPLOCK_URL (its base URL) and API_TOKEN so the CLI wakes it, or POST /v1/wake to it`;
}

/** The CLI's warnings: a failed wake as one line on stderr; anything else as the library says it. */
export const cliLog: Logger = (level, message, fields) => {
  if (!message.startsWith('waking the deployment failed')) return consoleLog(level, message, fields);
  process.stderr.write(`skiplock: waking the deployment at ${String(fields?.url)} failed (${String(fields?.error)}); it finds the work at its next safety check (IDLE_CHECK_MS) or cron\n`);
};
