import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'vitest';
/**
 * What a tick reports as next due (msUntilNextWork, the input of the wake state): every kind of
 * due instant a deployment's ticks can act on, and nothing it cannot.
 */
import { createSkiplock, type Skiplock } from '../../src/runtime/skiplock.ts';
import type { TickOptions } from '../../src/runtime/tick/tick.ts';
import { statement } from '../../src/store/sql.ts';
import { msUntilNextWork } from '../../src/store/wakeup.ts';
import { defineSchedule } from '../../src/runtime/schedules/definition.ts';
import { echo, exampleTasks } from '../../src/tasks/examples.ts';
import { createTestDb, type TestDb } from '../support/db.ts';

let db: TestDb;
let skiplock: Skiplock;
const TICK = { budgetMs: 15_000, pollIntervalMs: 20 };

/** A tick until idle, then what it would write as the wake state: ms until the next due work. */
async function tickAndPlanNext(sk: Skiplock, options: TickOptions) {
  const result = await sk.tick({ ...options, untilIdle: true });
  return { result, nextInMs: await sk.msUntilNextWork(options) };
}

beforeAll(async () => {
  db = await createTestDb();
  // Retention is a reason to wake too (its own test below): off here, so finished jobs are not.
  skiplock = createSkiplock({ sql: db.sql, tasks: exampleTasks, log: () => {}, retention: false });
});
afterAll(() => db.drop());
beforeEach(() => db.emptyJobs());

const insert = (sql: string) => db.sql.query(statement(sql));

test('an empty queue: the ticker sleeps until woken', async () => {
  expect((await tickAndPlanNext(skiplock, TICK)).nextInMs).toBeNull();
});

test('due work is done now; finished work leaves nothing to wake up for', async () => {
  await insert(`INSERT INTO skiplock.job (task, payload, timeout_ms) VALUES ('echo', '{"message":"x"}', 1000)`);
  const { result, nextInMs } = await tickAndPlanNext(skiplock, TICK);
  expect(result.done).toBe(1);
  expect(nextInMs).toBeNull();
});

test('a job due later: wake up when it is due', async () => {
  await insert(`INSERT INTO skiplock.job (task, payload, run_at) VALUES ('echo', '{"message":"x"}', now() + interval '30 seconds')`);
  const { nextInMs } = await tickAndPlanNext(skiplock, TICK);
  expect(nextInMs).toBeGreaterThan(28_000);
  expect(nextInMs).toBeLessThanOrEqual(30_000);
});

test('a job due in 200 ms, and a job running elsewhere: wake at the first, then at the lease expiry (the reaper)', async () => {
  await insert(`INSERT INTO skiplock.job (task, payload, run_at, timeout_ms) VALUES ('echo', '{"message":"x"}', now() + interval '200 milliseconds', 1000)`);
  await insert(`INSERT INTO skiplock.job (task, payload, status, attempts, locked_by, locked_until)
                VALUES ('sleep', '{"ms":1}', 'RUNNING', 1, 'elsewhere', now() + interval '1 hour')`);
  const first = await tickAndPlanNext(skiplock, TICK);
  expect(first.result.claimed).toBe(0);
  expect(first.nextInMs).toBeGreaterThan(0);
  expect(first.nextInMs).toBeLessThanOrEqual(200);
  await new Promise((resolve) => setTimeout(resolve, 300));
  const second = await tickAndPlanNext(skiplock, TICK);
  expect(second.result.done).toBe(1);
  // The job running elsewhere: its own invocation reports how it ends (its tick writes the wake
  // state too); if that invocation dies, its lease expiry is when the reaper can return it.
  expect(second.nextInMs).toBeGreaterThan(3_590_000);
  expect(second.nextInMs).toBeLessThanOrEqual(3_600_000);
});

test('finished jobs: the next retention pass, an hour after the oldest expires', async () => {
  const keeping = createSkiplock({ sql: db.sql, tasks: exampleTasks, log: () => {}, retention: { doneMs: 60_000 } });
  await insert(`INSERT INTO skiplock.job (task, payload, status, finished_at) VALUES ('echo', '{}', 'DONE', now() - interval '30 seconds')`);
  // DEAD jobs are kept until a person acts (deadMs null): they never wake it.
  await insert(`INSERT INTO skiplock.job (task, payload, status, finished_at, attempts) VALUES ('echo', '{}', 'DEAD', now() - interval '30 days', 1)`);
  const ms = await keeping.msUntilNextWork(TICK);
  expect(ms).toBeGreaterThan(3_600_000 + 29_000);
  expect(ms).toBeLessThanOrEqual(3_600_000 + 30_000);
  expect(await skiplock.msUntilNextWork(TICK)).toBeNull(); // retention: false
});

test('work this deployment cannot take does not keep the ticker awake', async () => {
  // Due and running jobs of a task this deployment lacks (another service's, or a rolling
  // deploy's), and a job whose timeout no alarm tick can give: ticking each second for them
  // would claim nothing, forever.
  await insert(`INSERT INTO skiplock.job (task, payload) VALUES ('another-service', '{}')`);
  await insert(`INSERT INTO skiplock.job (task, payload, status, attempts, locked_by, locked_until)
                VALUES ('another-service', '{}', 'RUNNING', 1, 'elsewhere', now() + interval '1 hour')`);
  await insert(`INSERT INTO skiplock.job (task, payload, timeout_ms) VALUES ('echo', '{"message":"x"}', 3600000)`);
  const { result, nextInMs } = await tickAndPlanNext(skiplock, TICK);
  expect(result.claimed).toBe(0);
  expect(nextInMs).toBeNull();
});

test('the next due job is found among several priorities', async () => {
  await insert(`INSERT INTO skiplock.job (task, payload, priority, run_at) VALUES
                ('echo', '{"message":"x"}', 5, now() + interval '50 seconds'),
                ('echo', '{"message":"x"}', 0, now() + interval '20 seconds'),
                ('another-service', '{}', -3, now() + interval '5 seconds'),
                ('echo', '{"message":"x"}', -7, now() + interval '40 seconds')`);
  const { nextInMs } = await tickAndPlanNext(skiplock, TICK);
  expect(nextInMs).toBeGreaterThan(18_000);
  expect(nextInMs).toBeLessThanOrEqual(20_000);
});

test("the wake-up question uses the skiplock's own tick defaults, as its ticks do", async () => {
  // 4.5 s fits the 15 s of TICK, not the 5 s the skiplock gives its ticks by default.
  const short = createSkiplock({ sql: db.sql, tasks: exampleTasks, log: () => {}, tick: { budgetMs: 5_000 }, retention: false });
  await insert(`INSERT INTO skiplock.job (task, payload, timeout_ms) VALUES ('echo', '{"message":"x"}', 4500)`);
  expect(await short.msUntilNextWork()).toBeNull();
  expect(await skiplock.msUntilNextWork(TICK)).toBeLessThanOrEqual(0);
});

test('next_claimable_at (the wake-up) and claimable_jobs (the claim) agree on what a tick could take', async () => {
  // The two functions state the claim's rule separately (migrations 003 and 005): if one changes
  // alone, the ticker sleeps through work or wakes for work it cannot take.
  await insert(`INSERT INTO skiplock.job (task, payload, priority, run_at, timeout_ms, attempts, max_attempts, status, locked_by, locked_until)
    SELECT (ARRAY['echo','sleep','other'])[1 + g % 3], '{}', (g % 5 - 2)::smallint,
           now() + ((g * 37) % 200 - 50) * interval '1 second', 1000 * (1 + (g * 13) % 40), least(g % 4, 1 + g % 3), 1 + g % 3,
           'QUEUED', NULL, NULL
      FROM generate_series(1, 300) g`);
  const cases: [string[], number][] = [[['echo'], 5_000], [['echo', 'sleep'], 20_000], [['sleep'], 40_000], [['other', 'echo'], 1_000], [['nope'], 60_000]];
  const found: (Date | null)[] = [];
  for (const [tasks, budgetMs] of cases) {
    const [row] = await db.sql.query<{ wake: Date | null; claim: Date | null }>(statement(
      `SELECT skiplock.next_claimable_at($1::text[], $2) AS wake,
              (SELECT min(j.run_at) FROM skiplock.claimable_jobs(100000, 'infinity', $2, $1::text[]) AS c(id) JOIN skiplock.job j ON j.id = c.id) AS claim`,
      [tasks, budgetMs],
    ));
    expect(row!.wake, `${tasks} ${budgetMs}`).toEqual(row!.claim);
    found.push(row!.claim);
  }
  expect(found.filter((d) => d !== null).length).toBeGreaterThanOrEqual(3); // the cases reach real jobs
  expect(found.at(-1)).toBeNull();
});

describe('schedules keep the ticker awake until their next instant', () => {
  const T0 = new Date('2026-06-01T12:00:03.000Z');
  const every10s = defineSchedule({ name: 'every-10s', cron: '*/10 * * * * *', task: echo, payload: { message: 'tick' } });
  const clockAt = (start: Date) => {
    let t = start.getTime();
    return { now: () => new Date(t), advance: (ms: number) => void (t += ms) };
  };
  beforeEach(() => db.sql.query(statement(`TRUNCATE skiplock.schedule CASCADE`)));

  test('a static per-10-seconds schedule, idle queue: wake up by its next instant, and it fires all six in a minute', async () => {
    const clock = clockAt(T0);
    const ticker = createSkiplock({ sql: db.sql, tasks: exampleTasks, schedules: [every10s], log: () => {}, now: clock.now, retention: false });
    const first = await tickAndPlanNext(ticker, TICK);
    expect(first.nextInMs).not.toBeNull();
    expect(first.nextInMs!).toBeLessThanOrEqual(10_000);
    expect(first.nextInMs).toBe(7_000); // 12:00:10 from 12:00:03
    // Follow the alarm for a minute: each wake-up lands on an instant, and every instant fires.
    let next = first.nextInMs!;
    let fired = 0;
    for (let i = 0; i < 6; i += 1) {
      clock.advance(next);
      const { result, nextInMs } = await tickAndPlanNext(ticker, TICK);
      fired += result.fired;
      expect(result.done).toBe(1);
      expect(nextInMs).toBe(10_000);
      next = nextInMs!;
    }
    expect(fired).toBe(6);
    const [row] = await db.sql.query(statement(`SELECT count(*)::int AS n FROM skiplock.cron_firing WHERE schedule_name = 'every-10s'`));
    expect(row!.n).toBe(6);
  });

  test('a dynamic schedule of one of its tasks counts, also before any tick computed its next run', async () => {
    const clock = clockAt(T0);
    const ticker = createSkiplock({ sql: db.sql, tasks: exampleTasks, log: () => {}, now: clock.now });
    await ticker.putSchedule('tenant-1', { cron: '*/10 * * * * *', task: 'echo', payload: { message: 'x' } });
    // Put after the last tick: its next run is not stored yet.
    expect(await ticker.msUntilNextWork(TICK)).toBe(7_000);
    await tickAndPlanNext(ticker, TICK);
    expect(await ticker.msUntilNextWork(TICK)).toBe(7_000);
  });

  test("schedules this deployment does not fire never keep it awake", async () => {
    const clock = clockAt(T0);
    // Another service's dynamic schedule (a task this deployment lacks), another deployment's
    // static one, a disabled one, and one whose timing this runtime cannot compute.
    await insert(`INSERT INTO skiplock.schedule (name, source, cron, task, watermark) VALUES
                  ('other-task', 'dynamic', '*/10 * * * * *', 'another-service', '${T0.toISOString()}'),
                  ('other-deploy', 'static', '*/10 * * * * *', 'echo', '${T0.toISOString()}')`);
    await insert(`INSERT INTO skiplock.schedule (name, source, cron, task, enabled, watermark) VALUES
                  ('off', 'dynamic', '*/10 * * * * *', 'echo', false, '${T0.toISOString()}')`);
    await insert(`INSERT INTO skiplock.schedule (name, source, cron, tz, task, watermark) VALUES
                  ('bad-zone', 'dynamic', '*/10 * * * * *', 'Nowhere/Atlantis', 'echo', '${T0.toISOString()}')`);
    const ticker = createSkiplock({ sql: db.sql, tasks: exampleTasks, log: () => {}, now: clock.now });
    expect((await tickAndPlanNext(ticker, TICK)).nextInMs).toBeNull();
  });

  test("in a shared database, its next instant is found without walking another service's schedules", async () => {
    const clock = clockAt(T0);
    // 5,000 schedules of another service, all due before this deployment's one (statistics skewed
    // toward that service's task): the wake-up question probes per task, it does not walk them.
    await insert(`INSERT INTO skiplock.schedule (name, source, every_ms, task, watermark, next_run_at)
                  SELECT 'other-' || g, 'dynamic', 60000, 'another-service', '${T0.toISOString()}', '${T0.toISOString()}'::timestamptz + g * interval '1 millisecond'
                    FROM generate_series(1, 5000) g`);
    await insert(`INSERT INTO skiplock.schedule (name, source, every_ms, task, watermark, next_run_at)
                  VALUES ('mine', 'dynamic', 60000, 'echo', '${T0.toISOString()}', '${T0.toISOString()}'::timestamptz + interval '57 seconds')`);
    await insert(`ANALYZE skiplock.schedule`);
    const ticker = createSkiplock({ sql: db.sql, tasks: exampleTasks, log: () => {}, now: clock.now });
    expect(await ticker.msUntilNextWork(TICK)).toBe(57_000);
    const wake = msUntilNextWork({ now: T0, tasks: [...ticker.tasks.keys()], budgetMs: 14_000, schedules: [] });
    const plan = (await db.sql.query(statement(`EXPLAIN (ANALYZE, COSTS OFF) ${wake.text}`, wake.values))).map((r) => String(Object.values(r)[0]));
    const walked = plan.map((line) => Number(/Rows Removed by Filter: (\d+)/.exec(line)?.[1] ?? 0)).reduce((a, b) => a + b, 0);
    expect(walked, plan.join('\n')).toBeLessThan(10);
  });
});
