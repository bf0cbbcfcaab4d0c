/** A real database, the example tasks and the app over them; requests go straight to app.request. */
import { createApp, type AppOptions } from '../../src/http/app.ts';
import { createSkiplock, type Skiplock, type SkiplockConfig } from '../../src/runtime/skiplock.ts';
import type { Task } from '../../src/runtime/tasks/task.ts';
import { statement } from '../../src/store/sql.ts';
import { exampleTasks } from '../../src/tasks/examples.ts';
import { createTestDb, type TestDb } from '../support/db.ts';

export const API_TOKEN = 'test-api-token-0123456789';
export const CRON_SECRET = 'test-cron-secret-9876543210';

export interface CallOptions {
  /** JSON-encoded unless it is a string (sent as is). */
  body?: unknown;
  headers?: Record<string, string>;
  /** Bearer token; null sends no Authorization header. Default API_TOKEN. */
  token?: string | null;
}

export interface TestApp {
  db: TestDb;
  skiplock: Skiplock;
  app: ReturnType<typeof createApp>;
  call(method: string, path: string, options?: CallOptions): Promise<Response>;
  /** Rows in skiplock.job. */
  countJobs(): Promise<number>;
  close(): Promise<void>;
}

export async function createTestApp(
  options: { tasks?: readonly Task[]; app?: Partial<AppOptions>; skiplock?: Partial<SkiplockConfig> } = {},
): Promise<TestApp> {
  const db = await createTestDb();
  const skiplock = createSkiplock({ sql: db.sql, tasks: options.tasks ?? exampleTasks, log: () => {}, ...options.skiplock });
  const app = createApp({
    skiplock,
    apiToken: API_TOKEN,
    cronSecret: CRON_SECRET,
    tick: { untilIdle: true, budgetMs: 20_000, pollIntervalMs: 10 },
    ...options.app,
  });
  return {
    db,
    skiplock,
    app,
    call(method, path, { body, headers = {}, token = API_TOKEN } = {}) {
      const init: RequestInit = { method, headers: { ...headers } };
      if (token !== null) (init.headers as Record<string, string>).authorization ??= `Bearer ${token}`;
      if (body !== undefined) {
        init.body = typeof body === 'string' ? body : JSON.stringify(body);
        (init.headers as Record<string, string>)['content-type'] ??= 'application/json';
      }
      return Promise.resolve(app.request(new Request(`http://skiplock.test${path}`, init)));
    },
    async countJobs() {
      const [row] = await db.sql.query(statement('SELECT count(*)::int AS n FROM skiplock.job'));
      return Number(row!.n);
    },
    close: () => db.drop(),
  };
}
