/**
 * Typed ctx.invoke and ctx.enqueue (Register, src/runtime/tasks/task-types.ts): test/types/register/ is
 * compiled as its own program, since its Register declaration would type every handler of the
 * repository. Its `@ts-expect-error` lines must each be an error; wrong-payload.ts's one error
 * must name the invoked task's payload field, not a union of every task's payload.
 */
import { execFile } from 'node:child_process';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { expect, test } from 'vitest';

const run = promisify(execFile);
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
const dir = join(import.meta.dirname, 'register');

async function compile(project: string): Promise<{ code: number; output: string }> {
  try {
    const { stdout } = await run(process.execPath, [tsc, '-p', join(dir, project)], { encoding: 'utf8' });
    return { code: 0, output: stdout };
  } catch (error) {
    const { stdout = '', code = 1 } = error as { stdout?: string; code?: number };
    return { code, output: stdout };
  }
}

test('a project that declares Register gets typed ctx.invoke and ctx.enqueue', async () => {
  const { code, output } = await compile('tsconfig.json');
  expect(output).toBe('');
  expect(code).toBe(0);
}, 120_000);

test("a wrong payload's error names that task's payload", async () => {
  const { code, output } = await compile('tsconfig.wrong.json');
  expect(code).not.toBe(0);
  expect(output.trim().split('\n')).toEqual([expect.stringMatching(/wrong-payload\.ts\(9,\d+\): error TS2322: Type 'string' is not assignable to type 'number'\./)]);
}, 120_000);
