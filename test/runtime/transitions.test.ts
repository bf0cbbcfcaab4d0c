/**
 * The state machine of src/core/state.ts is what the SQL does: a trigger records every status
 * change the statements make while a workload walks every path (claim, done, retry, dead,
 * release, cancel while QUEUED and while RUNNING, retry by a person, the reaper, a parent waiting
 * for the child it invoked and woken by it, a waiting parent cancelled), and each one
 * must be an arrow of TRANSITIONS — and each arrow must have been taken.
 */
import { afterAll, beforeAll, expect, test } from 'vitest';
import { z } from 'zod';
import { TRANSITIONS } from '../../src/core/state.ts';
import { createSkiplock, defineTask, PermanentError } from '../../src/index.ts';
import { statement } from '../../src/store/sql.ts';
import { createTestDb, type TestDb } from '../support/db.ts';

let db: TestDb;
beforeAll(async () => {
  db = await createTestDb();
  await db.sql.batch([
    statement(`CREATE TABLE status_change (old text, new text NOT NULL)`),
    // Since migration 021 a job's status lives in two tables: its queue row's while it is live,
    // its record's once it ended (the record's status meanwhile is a placeholder). So: an enqueue
    // is the record's INSERT; a live change, the queue row's UPDATE; an end, the queue row's
    // DELETE, from its status to the one the same statement wrote in the record (an AFTER trigger
    // sees it); a revival (a person's retry), the record's UPDATE from a finished status.
    statement(`CREATE FUNCTION record_status_change() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF TG_TABLE_NAME = 'job_record' THEN
          IF TG_OP = 'INSERT' THEN
            INSERT INTO status_change VALUES (NULL, NEW.status);
          ELSIF OLD.status IN ('DONE', 'DEAD', 'CANCELLED') AND OLD.status IS DISTINCT FROM NEW.status THEN
            INSERT INTO status_change VALUES (OLD.status, NEW.status);
          END IF;
        ELSIF TG_OP = 'UPDATE' AND OLD.status IS DISTINCT FROM NEW.status THEN
          INSERT INTO status_change VALUES (OLD.status, NEW.status);
        ELSIF TG_OP = 'DELETE' THEN
          INSERT INTO status_change
          SELECT OLD.status, r.status FROM skiplock.job_record r WHERE r.id = OLD.id AND r.status IN ('DONE', 'DEAD', 'CANCELLED');
        END IF;
        RETURN NULL;
      END $$`),
    statement(`CREATE TRIGGER record_status_change AFTER INSERT OR UPDATE ON skiplock.job_record
      FOR EACH ROW EXECUTE FUNCTION record_status_change()`),
    statement(`CREATE TRIGGER record_status_change AFTER UPDATE OR DELETE ON skiplock.queue
      FOR EACH ROW EXECUTE FUNCTION record_status_change()`),
  ]);
});
afterAll(() => db.drop());

test('every status change the statements make is an arrow of TRANSITIONS, and every arrow is taken', async () => {
  let started = 0;
  const tasks = [
    defineTask({ name: 'ok', payload: z.object({}), handler: () => 'done' }),
    defineTask({ name: 'once', payload: z.object({}), backoff: () => 0, handler: (_p, ctx) => {
      if (ctx.attempt === 1) throw new Error('transient');
    } }),
    defineTask({ name: 'poison', payload: z.object({}), handler: () => {
      throw new PermanentError('bad data');
    } }),
    defineTask({ name: 'waits', payload: z.object({}), handler: (_p, ctx) =>
      new Promise((_resolve, reject) => {
        started += 1;
        ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason));
      }) }),
  ];
  const steps = [
    // RUNNING → WAITING, then WAITING → QUEUED when its child ends (the fan-in).
    defineTask({ name: 'parent', payload: z.object({}), handler: async (_p, ctx) => ctx.invoke('child', 'ok', {}) }),
    // WAITING → CANCELLED: its child's task is paused, so it waits until a person cancels it.
    defineTask({ name: 'stuck-parent', payload: z.object({}), handler: async (_p, ctx) => ctx.invoke('child', 'paused', {}) }),
    defineTask({ name: 'paused', payload: z.object({}), handler: () => null }),
    // RUNNING → WAITING (asleep), then WAITING → RUNNING when the claim finds its wake time come.
    defineTask({ name: 'napper', payload: z.object({}), handler: async (_p, ctx) => void (await ctx.sleep('nap', 500)) }),
  ];
  const skiplock = createSkiplock({ sql: db.sql, tasks: [...tasks, ...steps], log: () => {} });

  await skiplock.pauseTask('paused');
  await skiplock.enqueueBatch([{ task: 'ok' }, { task: 'once' }, { task: 'poison' }, { task: 'parent' }, { task: 'stuck-parent' }, { task: 'napper' }]);
  await skiplock.tick({ untilIdle: true });
  await new Promise((resolve) => setTimeout(resolve, 600));
  await skiplock.tick({ untilIdle: true });
  const stuck = (await skiplock.listJobs({ status: 'WAITING' })).jobs[0]!;
  await skiplock.cancelJob(stuck.id); // WAITING → CANCELLED (and its QUEUED child)
  const [queued] = await skiplock.enqueueBatch([{ task: 'ok', delayMs: 60_000 }]);
  await skiplock.cancelJob(queued!.job.id); // QUEUED → CANCELLED
  await skiplock.retryJob(queued!.job.id); // CANCELLED → QUEUED
  const dead = (await skiplock.listJobs({ status: 'DEAD' })).jobs[0]!;
  await skiplock.retryJob(dead.id); // DEAD → QUEUED

  // Cancelled while RUNNING, seen at a heartbeat; and one released at shutdown.
  const running = await skiplock.enqueue({ task: 'waits' });
  const controller = new AbortController();
  const ticking = skiplock.tick({ leaseMs: 300, signal: controller.signal, drainMs: 100 });
  while (started < 1) await new Promise((resolve) => setTimeout(resolve, 10));
  expect((await skiplock.cancelJob(running.id)).outcome).toBe('requested');
  while ((await skiplock.getJob(running.id))!.status === 'RUNNING') await new Promise((resolve) => setTimeout(resolve, 20));
  await skiplock.enqueue({ task: 'waits' });
  while (started < 2) await new Promise((resolve) => setTimeout(resolve, 10));
  controller.abort();
  await ticking;

  const rows = await db.sql.query<{ old: string | null; new: string }>(statement(`SELECT DISTINCT old, new FROM status_change`));
  const inserted = rows.filter((r) => r.old === null).map((r) => r.new);
  const changes = rows.filter((r) => r.old !== null).map((r) => `${r.old} → ${r.new}`).sort();
  const arrows = Object.entries(TRANSITIONS).flatMap(([from, tos]) => tos.map((to) => `${from} → ${to}`)).sort();
  expect(inserted).toEqual(['QUEUED']);
  expect(changes).toEqual(arrows);
});
