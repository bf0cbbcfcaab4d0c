/**
 * A terminal's Ctrl-C sends SIGINT to every process of the foreground process group. The local
 * PostgreSQL is our child, so it would get it too and shut down at once, under the feet of the
 * graceful shutdown that still needs it to release running jobs. So `npm start` re-runs itself
 * as a child in a process group of its own, and this parent forwards SIGINT/SIGTERM to it.
 */
import { spawn } from 'node:child_process';

const CHILD_ENV = 'SKIPLOCK_OWN_PROCESS_GROUP';

/**
 * In the parent: starts the child, forwards signals and exits with it; returns false. In the
 * child: returns true, and calls `onParentGone` if the parent dies without a signal (SIGKILL).
 */
export function inOwnProcessGroup(onParentGone: () => void): boolean {
  if (process.env[CHILD_ENV] === '1') {
    process.on('disconnect', onParentGone);
    return true;
  }
  const child = spawn(process.execPath, [...process.execArgv, process.argv[1]!, ...process.argv.slice(2)], {
    detached: true,
    stdio: ['inherit', 'inherit', 'inherit', 'ipc'],
    env: { ...process.env, [CHILD_ENV]: '1' },
  });
  for (const signal of ['SIGINT', 'SIGTERM'] as const) process.on(signal, () => child.kill(signal));
  child.on('exit', (code, signal) => process.exit(code ?? (signal === 'SIGINT' ? 130 : 1)));
  return false;
}
