/**
 * The CLI's versions and bulk commands (src/cli.ts): `replay` exits 1 when the new code would
 * fail a recorded job, `jobs retry|cancel …` acts by filter, `restart <id> --from-step`.
 */
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { createSkiplock } from '../src/index.ts';
import { statement } from '../src/store/sql.ts';
import { createTestDb, type TestDb } from './support/db.ts';
import { tasks as v1 } from './fixtures/replay-tasks-v1.ts';

const PACKAGE_CLI = fileURLToPath(new URL('../src/cli.ts', import.meta.url));
const V1 = fileURLToPath(new URL('./fixtures/replay-tasks-v1.ts', import.meta.url));
const V2 = fileURLToPath(new URL('./fixtures/replay-tasks-v2.ts', import.meta.url));

let db: TestDb;
let jobId: string;
beforeAll(async () => {
  db = await createTestDb();
  const s = createSkiplock({ sql: db.sql, tasks: v1, log: () => {} });
  jobId = (await s.enqueue({ task: 'wf', payload: {} })).id;
  await s.tick({ untilIdle: true });
});
afterAll(() => db.drop());

function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string; json: any }> {
  return new Promise((resolve) => {
    execFile(process.execPath, ['--experimental-strip-types', '--disable-warning=ExperimentalWarning', PACKAGE_CLI, ...args], { env: { ...process.env, DATABASE_URL: db.url } }, (error, stdout, stderr) => {
      const code = error ? Number((error as { code?: unknown }).code ?? 1) : 0;
      let json: unknown;
      try {
        json = JSON.parse(stdout || stderr);
      } catch {
        json = undefined;
      }
      resolve({ code, stdout, stderr, json });
    });
  });
}

test('replay: exit 0 for the deployed code, 1 with the reason for a step inserted before the recorded wait; writes nothing', async () => {
  const same = await cli(['replay', '--tasks', V1]);
  expect(same.code, same.stderr).toBe(0);
  expect(same.json).toEqual({ checked: 1, failures: [] });
  const next = await cli(['replay', '--tasks', V2, '--task', 'wf', '--status', 'queued,waiting', '--limit', '10']);
  expect(next.code, next.stderr).toBe(1);
  expect(next.json.failures).toEqual([{ id: jobId, task: 'wf', reason: expect.stringMatching(/step 1 was "wait" \(sleep\) in an earlier run, and is "fraud-check" \(step\) now/) }]);
  const [row] = await db.sql.query(statement(`SELECT status, step_count FROM skiplock.job WHERE id = $1`, [jobId]));
  expect(row).toMatchObject({ status: 'WAITING', step_count: 1 + 1 });
});

test('jobs cancel / retry by filter, restart from a step', async () => {
  const dry = await cli(['jobs', 'cancel', '--task', 'wf', '--dry-run']);
  expect(dry.json).toEqual({ matched: 1, changed: 0, wouldChange: 1 });
  expect((await cli(['jobs', 'cancel', '--task', 'wf'])).json).toEqual({ matched: 1, changed: 1 });
  const restarted = await cli(['restart', jobId, '--from-step', 'wait']);
  expect(restarted.code, restarted.stderr).toBe(0);
  expect(restarted.json.job).toMatchObject({ id: jobId, status: 'QUEUED', stepCount: 1 });
  // Sent again: the job is live again, so a conflict, and nothing forgotten or re-run.
  const again = await cli(['restart', jobId, '--from-step', 'wait']);
  expect(again.code).toBe(1);
  expect(again.json.error).toMatchObject({ code: 'conflict', message: expect.stringMatching(/is QUEUED: only a DEAD or CANCELLED job can be restarted/) });
  expect((await cli(['jobs', 'restart', '--task', 'wf'])).json).toEqual({ matched: 1, changed: 0 });
  expect((await cli(['jobs', 'cancel', '--task', 'wf'])).json).toEqual({ matched: 1, changed: 1 });
  expect((await cli(['jobs', 'retry', '--task', 'wf', '--status', 'cancelled'])).json).toEqual({ matched: 1, changed: 1 });
  const usage = await cli(['jobs', 'explode', '--task', 'wf']);
  expect(usage.code).toBe(2);
  const refused = await cli(['jobs', 'retry']);
  expect(refused.code).toBe(1);
  expect(refused.json.error.code).toBe('invalid_request');
});
