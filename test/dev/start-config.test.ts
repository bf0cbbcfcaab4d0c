/**
 * `npm start` with a bad configuration, as a new user meets it: one line on stderr naming the
 * variable and what is wrong with it, no stack trace, a non-zero exit code.
 */
import { afterAll, beforeAll, expect, test } from 'vitest';
import { freePort } from '../../src/dev/embedded-postgres.ts';
import { createTestDb, type TestDb } from '../support/db.ts';
import { lines, runEntry } from '../support/spawn-entry.ts';

let db: TestDb;
beforeAll(async () => (db = await createTestDb()));
afterAll(() => db.drop());

const start = async (env: Record<string, string>, args = ['--node']) =>
  runEntry('src/dev/start.ts', args, { API_TOKEN: 'start-config-token', PORT: String(await freePort()), ...env });

function expectOneLine(run: { code: number; stderr: string }, pattern: RegExp): void {
  expect(run.code, run.stderr).not.toBe(0);
  expect(lines(run.stderr), run.stderr).toHaveLength(1);
  expect(run.stderr).toMatch(pattern);
  expect(run.stderr).not.toMatch(/\n\s+at /);
}

test('PORT=abc and PORT=80000: one line each', async () => {
  expectOneLine(await start({ PORT: 'abc' }), /PORT must be an integer from 1 to 65535, got "abc"/);
  expectOneLine(await start({ PORT: '80000' }), /PORT must be an integer from 1 to 65535, got "80000"/);
});

test('DATABASE_URL malformed: one line naming it, not "getaddrinfo ENOTFOUND base"', async () => {
  const run = await start({ DATABASE_URL: 'notaurl' });
  expectOneLine(run, /DATABASE_URL is not a PostgreSQL URL/);
  expect(run.stderr).not.toContain('ENOTFOUND');
});

test('DATABASE_URL unreachable or refusing: one line naming it, the server and the reason; no password shown', async () => {
  const refused = new URL(db.url);
  refused.port = String(await freePort());
  for (const args of [[], ['--node']]) { // the Worker stack (npm start) and the Node runner (npm run start:node)
    const run = await start({ DATABASE_URL: refused.toString() }, args);
    expectOneLine(run, new RegExp(`DATABASE_URL: cannot connect to PostgreSQL at 127\\.0\\.0\\.1:${refused.port} \\(connection refused\\)`));
  }

  const wrongPassword = new URL(db.url);
  wrongPassword.password = 'not-the-password';
  const denied = await start({ DATABASE_URL: wrongPassword.toString() });
  expectOneLine(denied, /DATABASE_URL: .*password authentication failed/);
  expect(denied.stderr).not.toContain('not-the-password');
});
