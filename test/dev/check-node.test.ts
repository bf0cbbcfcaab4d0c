/**
 * The Node guard every npm script runs first (src/dev/check-node.cjs): one clear line on a Node
 * older than 22.12, nothing on a supported one. (Checked by hand to run on Node 14 and 20.)
 */
import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { expect, test } from 'vitest';
import packageJson from '../../package.json' with { type: 'json' };

const GUARD = new URL('../../src/dev/check-node.cjs', import.meta.url);
const guard = createRequire(import.meta.url)(GUARD.pathname) as {
  MIN: number[];
  tooOld(version: string): boolean;
  message(version: string, nodeInstalledByNpm: boolean): string;
};

test('too old below 22.12, supported from 22.12 on', () => {
  for (const version of ['v14.21.3', '18.20.0', '20.20.2', '22.0.0', '22.11.9']) expect(guard.tooOld(version), version).toBe(true);
  for (const version of ['22.12.0', 'v22.23.3', '23.0.0', '24.21.0', '30.1.0']) expect(guard.tooOld(version), version).toBe(false);
});

test('the message is one line naming both versions and the way out', () => {
  for (const installed of [true, false]) {
    const line = guard.message('v20.20.2', installed);
    expect(line).not.toContain('\n');
    expect(line).toMatch(/^skiplock needs Node >= 22\.12 \(this is 20\.20\.2\): /);
  }
  expect(guard.message('20.20.2', false)).toContain('npm install');
});

test('on a supported Node it prints nothing and exits 0', () => {
  expect(execFileSync(process.execPath, [GUARD.pathname], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] })).toBe('');
});

test('it asks for no less than engines.node, which states what the built package needs (the repository tooling needs more)', () => {
  const engines = /^>=(\d+)(?:\.(\d+))?/.exec(packageJson.engines.node);
  expect(engines).not.toBeNull();
  const [major, minor] = [Number(engines![1]), Number(engines![2] ?? 0)];
  expect(major < guard.MIN[0]! || (major === guard.MIN[0] && minor <= guard.MIN[1]!)).toBe(true);
});

test('every npm script that runs the code runs the guard first', () => {
  for (const name of ['start', 'start:node', 'migrate', 'test', 'bench', 'chaos'])
    expect(packageJson.scripts[name as keyof typeof packageJson.scripts], name).toMatch(/^node src\/dev\/check-node\.cjs && /);
});
