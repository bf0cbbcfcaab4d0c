/** Runs an entry point (npm start, the Node runner, the CLI) as a user would, for its exit code and output. */
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export interface EntryRun {
  code: number;
  stdout: string;
  stderr: string;
}

export function runEntry(file: string, args: string[], env: Record<string, string | undefined>, timeoutMs = 30_000): Promise<EntryRun> {
  const childEnv: NodeJS.ProcessEnv = { ...process.env };
  for (const [key, value] of Object.entries(env)) {
    if (value === undefined) delete childEnv[key];
    else childEnv[key] = value;
  }
  return new Promise((resolve) => {
    execFile(process.execPath, ['--experimental-strip-types', fileURLToPath(new URL(`../../${file}`, import.meta.url)), ...args],
      { env: childEnv, timeout: timeoutMs, killSignal: 'SIGKILL' }, (error, stdout, stderr) => {
        const code = error ? Number((error as { code?: unknown }).code ?? 1) : 0;
        resolve({ code: Number.isNaN(code) ? -1 : code, stdout, stderr });
      });
  });
}

/** The non-empty lines of a stream's text. */
export function lines(text: string): string[] {
  return text.split('\n').filter((line) => line.trim() !== '');
}
