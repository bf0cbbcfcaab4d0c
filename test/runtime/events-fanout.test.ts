/**
 * `on:` whoever sends (issue 30 item 3): the deployment that defines an `on:` task starts its job,
 * also for an event sent by a process without that task (another service, the CLI without
 * --tasks). A deployment registers its tasks and their `on:` names (skiplock.registered_task) with
 * its first tick; a send records, per subscribed task it could not start itself, a pending row
 * (skiplock.event_pending); the ticks of a deployment with the task dispatch them, once.
 */
import { afterAll, beforeAll, beforeEach, expect, test } from 'vitest';
import { z } from 'zod';
import { createSkiplock, defineTask, type Task } from '../../src/index.ts';
import { statement, type Sql, type Statement } from '../../src/store/sql.ts';
import { createTestDb, type TestDb } from '../support/db.ts';

let db: TestDb;
beforeAll(async () => {
  db = await createTestDb();
});
afterAll(() => db.drop());
beforeEach(async () => {
  await db.emptyJobs('skiplock.event', 'skiplock.registered_task');
});

const quiet = () => {};
const rows = (text: string, values: unknown[] = []) => db.sql.query(statement(text, values));

const welcome = (handled: string[] = []) =>
  defineTask({
    name: 'welcome',
    payload: z.object({ userId: z.string() }),
    on: 'user.created',
    timeoutMs: 2_000,
    handler: (p) => {
      handled.push(p.userId);
      return { welcomed: p.userId };
    },
  });
const strict = defineTask({ name: 'strict', payload: z.object({ age: z.number() }), on: 'user.created', timeoutMs: 2_000, handler: () => null });

function make(tasks: Task[], sql: Sql = db.sql) {
  return createSkiplock({ sql, tasks, log: quiet, retention: false });
}
const tickIdle = (s: ReturnType<typeof make>) => s.tick({ untilIdle: true, budgetMs: 5_000, pollIntervalMs: 10 });

test('an event sent by an instance without the task starts the on: job in the deployment that defines it, once', async () => {
  const handled: string[] = [];
  const deployment = make([welcome(handled)]);
  await tickIdle(deployment); // its first tick registers its tasks and their on: names
  const other = make([]);
  const sent = await other.sendEvent({ name: 'user.created', data: { userId: 'u1' } });
  expect(sent).toMatchObject({ started: 0, pending: 1, created: true });
  // The sender's answer again (an idempotency key) and the listing say the same.
  const [listed] = (await other.listEvents()).events;
  expect(listed).toMatchObject({ id: sent.id, started: 0, pending: 1 });

  await tickIdle(deployment);
  expect(handled).toEqual(['u1']);
  const jobs = await rows(`SELECT task, payload, status, idempotency_key FROM skiplock.job`);
  expect(jobs).toEqual([{ task: 'welcome', payload: { userId: 'u1' }, status: 'DONE', idempotency_key: `skiplock:event:${sent.id}:welcome` }]);
  const [event] = (await other.listEvents()).events;
  expect(event).toMatchObject({ started: 1, pending: 0 });
  expect(await rows(`SELECT * FROM skiplock.event_pending`)).toEqual([]);
  await tickIdle(deployment);
  expect(handled).toEqual(['u1']);
});

test('a payload the task refuses is reported on the event, once; the other task starts', async () => {
  const deployment = make([welcome(), strict]);
  await tickIdle(deployment);
  const sent = await make([]).sendEvent({ name: 'user.created', data: { userId: 'u2' } });
  expect(sent).toMatchObject({ started: 0, pending: 2 });
  await tickIdle(deployment);
  await tickIdle(deployment);
  const [event] = (await deployment.listEvents()).events;
  expect(event).toMatchObject({ started: 1, pending: 0, refused: [{ task: 'strict', message: expect.stringContaining('age') }] });
  expect((await rows(`SELECT task FROM skiplock.job`)).map((r) => r.task)).toEqual(['welcome']);
});

test('a sender that defines the task starts it itself; nothing is left pending for it', async () => {
  const deployment = make([welcome()]);
  await tickIdle(deployment);
  const sent = await make([welcome()]).sendEvent({ name: 'user.created', data: { userId: 'u3' } });
  expect(sent).toMatchObject({ started: 1, pending: 0 });
  expect(await rows(`SELECT * FROM skiplock.event_pending`)).toEqual([]);
});

test('an event no deployment subscribes to is stored and answered; one sent before the deployment registered starts nothing there', async () => {
  const early = await make([]).sendEvent({ name: 'user.created', data: { userId: 'early' } });
  expect(early).toMatchObject({ started: 0, pending: 0, created: true });
  const deployment = make([welcome()]);
  await tickIdle(deployment);
  expect(await rows(`SELECT * FROM skiplock.job`)).toEqual([]);
  const unknown = await make([]).sendEvent({ name: 'nobody.listens', data: {} });
  expect(unknown).toMatchObject({ started: 0, pending: 0, woken: 0, created: true });
});

test('two instances of the deployment ticking at once start each event\'s job exactly once', async () => {
  const handled: string[] = [];
  const a = make([welcome(handled)]);
  const b = make([welcome(handled)]);
  await Promise.all([tickIdle(a), tickIdle(b)]);
  const sender = make([]);
  const ids = [];
  for (let i = 0; i < 30; i++) ids.push((await sender.sendEvent({ name: 'user.created', data: { userId: `c${i}` } })).id);
  await Promise.all([tickIdle(a), tickIdle(b), tickIdle(a), tickIdle(b)]);
  expect(handled.sort()).toEqual(Array.from({ length: 30 }, (_, i) => `c${i}`).sort());
  const counts = await rows(`SELECT count(*)::int AS jobs, count(DISTINCT idempotency_key)::int AS keys FROM skiplock.job`);
  expect(counts).toEqual([{ jobs: 30, keys: 30 }]);
  const events = await rows(`SELECT started, pending FROM skiplock.event WHERE started <> 1 OR pending <> 0`);
  expect(events).toEqual([]);
});

test('dispatches racing on the same pending rows: one job per event and task, each refusal recorded once', async () => {
  const { dispatchPendingWith } = await import('../../src/runtime/events/events.ts');
  const { createRegistry } = await import('../../src/runtime/tasks/task.ts');
  await tickIdle(make([welcome(), strict]));
  const sender = make([]);
  for (let i = 0; i < 20; i++) await sender.sendEvent({ name: 'user.created', data: { userId: `r${i}` } });
  const registry = createRegistry([welcome(), strict]);
  const answers = await Promise.all(Array.from({ length: 6 }, () => dispatchPendingWith(db.sql, registry, null)));
  expect(answers.reduce((n, a) => n + a.started, 0)).toBe(20);
  expect(await rows(`SELECT count(*)::int AS n, count(DISTINCT idempotency_key)::int AS keys FROM skiplock.job WHERE task = 'welcome'`)).toEqual([{ n: 20, keys: 20 }]);
  const events = await rows(`SELECT started, pending, jsonb_array_length(refused) AS refusals FROM skiplock.event`);
  expect(events).toHaveLength(20);
  for (const e of events) expect(e).toEqual({ started: 1, pending: 0, refusals: 1 });
});

test('a deployment whose task no longer subscribes to the name leaves its pending rows alone (no busy loop)', async () => {
  await tickIdle(make([welcome()])); // registered: welcome on user.created
  await make([]).sendEvent({ name: 'user.created', data: { userId: 'u4' } });
  const renamed = defineTask({ name: 'welcome', payload: z.object({ userId: z.string() }), on: 'user.signed-up', timeoutMs: 2_000, handler: () => null });
  const counted = countingSql(db.sql);
  const newer = make([renamed], counted.sql);
  await tickIdle(newer);
  expect(counted.kinds).not.toContain('pending-read');
  expect(await rows(`SELECT * FROM skiplock.job`)).toEqual([]);
});

/** A Sql that records what kind of statement each one was. */
function countingSql(sql: Sql) {
  const kinds: string[] = [];
  const kindOf = (s: Statement) => (s.text.includes('claimable_jobs') ? 'claim' : s.text.includes('SELECT p.event_id::text AS event_id') ? 'pending-read' : s.text.includes('DELETE FROM skiplock.event_pending') ? 'dispatch' : 'other');
  return {
    kinds,
    sql: {
      ...sql,
      query<R extends Record<string, unknown>>(s: Statement) {
        kinds.push(kindOf(s));
        return sql.query<R>(s);
      },
      batch(statements: readonly Statement[]) {
        for (const s of statements) kinds.push(kindOf(s));
        return sql.batch(statements);
      },
    } as Sql,
  };
}

test('a tick of a deployment with on: tasks and nothing pending makes no statement beyond its claims; with something pending, a read and one dispatch', async () => {
  const idle = countingSql(db.sql);
  const deployment = make([welcome()], idle.sql);
  await tickIdle(deployment); // the first: registers (in its claim) and reads the schedules once
  idle.kinds.length = 0;
  await tickIdle(deployment);
  expect(idle.kinds.filter((k) => k !== 'claim')).toEqual([]);
  await make([]).sendEvent({ name: 'user.created', data: { userId: 'u5' } });
  idle.kinds.length = 0;
  await tickIdle(deployment);
  expect(idle.kinds.filter((k) => k === 'pending-read' || k === 'dispatch')).toEqual(['pending-read', 'dispatch']);
});

test('the tick after an outside send is due now: the sender wakes the deployment, and the wake state says so', async () => {
  const deployment = make([welcome()]);
  await tickIdle(deployment);
  expect(await deployment.msUntilNextWork()).toBeNull();
  await make([]).sendEvent({ name: 'user.created', data: { userId: 'u6' } });
  expect(await deployment.msUntilNextWork()).toBeLessThanOrEqual(0);
  await tickIdle(deployment);
  // Its job done, nothing is due any more.
  expect(await deployment.msUntilNextWork()).toBeNull();
});
