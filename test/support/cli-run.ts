/** Runs a CLI as a child process, as a user's shell does, for the CLI tests. */
import { execFile } from 'node:child_process';

export interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
  /** stdout parsed as JSON on success, stderr on failure; undefined when it is not JSON. */
  json: any;
}

export function runFile(file: string, args: string[], options: { env: NodeJS.ProcessEnv; cwd?: string }): Promise<CliRun> {
  return new Promise((resolve) => {
    execFile(file, args, { env: options.env, cwd: options.cwd }, (error, stdout, stderr) => {
      const code = error ? Number((error as { code?: unknown }).code ?? 1) : 0;
      let json: unknown;
      try {
        json = JSON.parse(code === 0 ? stdout : stderr);
      } catch {
        json = undefined;
      }
      resolve({ code, stdout, stderr, json });
    });
  });
}
