/**
 * Deploying new code under running workflows (issue 25): ctx.patched lets old runs finish on the
 * old path while new runs take the new one, its marker rides on the next step write, the rollout
 * recipe (add patched, wait, remove it) replays, a job that alternates between two versions is
 * retried rather than killed; restartJob gets a job that died of a deploy going again.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'vitest';
import { z } from 'zod';
import { createSkiplock, defineTask, type Task, type TaskContext } from '../../src/index.ts';
import { statement, type Sql, type Statement } from '../../src/store/sql.ts';
import { createTestDb, type TestDb } from '../support/db.ts';

let db: TestDb;
beforeAll(async () => {
  db = await createTestDb();
});
afterAll(() => db.drop());
beforeEach(async () => {
  await db.emptyJobs();
});

const quiet = () => {};
const T0 = new Date('2026-06-01T12:00:00.000Z');
const HOUR = 3600_000;
let clockAt = T0;

/** Which step fns ran, per job: a rerun of a recorded step would show here. */
const ran: string[] = [];
beforeEach(() => {
  ran.length = 0;
  clockAt = T0;
});

type Version = 'v1' | 'v2-broken' | 'v2' | 'v3';
/**
 * The trial: `order` reserves, waits an hour, ships. v2-broken inserts a fraud check
 * before the wait; v2 does it behind ctx.patched; v3 removes the patched call, keeping the check.
 */
function orderTask(version: Version): Task {
  const step = (ctx: TaskContext, id: string) => ctx.step(id, () => {
    ran.push(`${version}:${id}`);
    return id;
  });
  return defineTask({
    name: 'order',
    payload: z.object({}),
    maxAttempts: 3,
    backoff: () => 60_000,
    handler: async (_p, ctx) => {
      const done = [await step(ctx, 'reserve')];
      if (version === 'v2-broken' || version === 'v3' || (version === 'v2' && ctx.patched('fraud-check'))) done.push(await step(ctx, 'fraud-check'));
      await ctx.sleep('wait', HOUR);
      done.push(await step(ctx, 'ship'));
      return done;
    },
  });
}

/** Counts statements, to see that a marker costs no round trip of its own. */
function counting(sql: Sql) {
  const sent: Statement[] = [];
  const wrapped: Sql = {
    query: (s) => (sent.push(s), sql.query(s)),
    batch: (s) => (sent.push(...s), sql.batch(s)),
    close: async () => {},
  };
  return { sql: wrapped, sent };
}

const deploy = (version: Version, sql: Sql = db.sql) => createSkiplock({ sql, tasks: [orderTask(version)], log: quiet, now: () => clockAt, retention: false });

async function steps(jobId: string) {
  return (await db.sql.query(statement(`SELECT id, kind, status FROM skiplock.job_step WHERE job_id = $1 ORDER BY seq`, [jobId]))).map((r) => `${r.kind}:${r.id}:${r.status}`);
}

describe('ctx.patched', () => {
  test('a run started before the patch finishes on the old path, one started after takes the new one; both DONE', async () => {
    const old = await deploy('v1').enqueue({ task: 'order', payload: {} });
    await deploy('v1').tick({ untilIdle: true });
    expect(await steps(old.id)).toEqual(['step:reserve:done', 'sleep:wait:sleeping']);

    const v2 = deploy('v2');
    const fresh = await v2.enqueue({ task: 'order', payload: {} });
    await v2.tick({ untilIdle: true });
    expect(await steps(fresh.id)).toEqual(['step:reserve:done', 'patch:patched:fraud-check:done', 'step:fraud-check:done', 'sleep:wait:sleeping']);

    clockAt = new Date(T0.getTime() + 2 * HOUR);
    await v2.tick({ untilIdle: true });
    expect(await v2.getJob(old.id)).toMatchObject({ status: 'DONE', result: ['reserve', 'ship'] });
    expect(await v2.getJob(fresh.id)).toMatchObject({ status: 'DONE', result: ['reserve', 'fraud-check', 'ship'] });
    // The marker survived the replay, and no recorded step ran again.
    expect(await steps(fresh.id)).toEqual(['step:reserve:done', 'patch:patched:fraud-check:done', 'step:fraud-check:done', 'sleep:wait:done', 'step:ship:done']);
    expect(ran.sort()).toEqual(['v1:reserve', 'v2:fraud-check', 'v2:reserve', 'v2:ship', 'v2:ship']);
  });

  test('the marker rides on the next step write: no statement of its own', async () => {
    const plain = counting(db.sql);
    const a = deploy('v1', plain.sql);
    await a.enqueue({ task: 'order', payload: {} });
    await a.tick({ untilIdle: true });
    const patched = counting(db.sql);
    const b = deploy('v2', patched.sql);
    await b.enqueue({ task: 'order', payload: {} });
    await b.tick({ untilIdle: true });
    // v2's run has one step more (fraud-check), and nothing else.
    expect(patched.sent.length).toBe(plain.sent.length + 1);
  });

  test('the rollout recipe: add patched, wait until no run predates it, remove the call (the marker is tolerated)', async () => {
    const v2 = deploy('v2');
    const job = await v2.enqueue({ task: 'order', payload: {} });
    await v2.tick({ untilIdle: true });
    // v3: patched removed, the new path kept: the recorded marker is skipped.
    clockAt = new Date(T0.getTime() + 2 * HOUR);
    const v3 = deploy('v3');
    await v3.tick({ untilIdle: true });
    expect(await v3.getJob(job.id)).toMatchObject({ status: 'DONE', result: ['reserve', 'fraud-check', 'ship'] });
    expect(ran).toEqual(['v2:reserve', 'v2:fraud-check', 'v3:ship']);
  });

  test('a gradual deployment: a run of the old version on a history the new one wrote is retried, not killed, and the new version finishes it', async () => {
    const v2 = deploy('v2');
    const job = await v2.enqueue({ task: 'order', payload: {} });
    await v2.tick({ untilIdle: true });
    clockAt = new Date(T0.getTime() + 2 * HOUR);
    await deploy('v1').tick({ untilIdle: true });
    const afterOld = (await v2.getJob(job.id))!;
    expect(afterOld).toMatchObject({ status: 'QUEUED', attempts: 1 });
    expect(afterOld.lastError).toMatch(/"wait" was step 3 of an earlier run and is step 2 now \(where "fraud-check" was recorded\).*after the marker "patched:fraud-check", which this code does not ask about/);
    clockAt = new Date(clockAt.getTime() + 60_000);
    await v2.tick({ untilIdle: true });
    expect(await v2.getJob(job.id)).toMatchObject({ status: 'DONE', result: ['reserve', 'fraud-check', 'ship'] });
  });

  test('the same patch id answers the same within a run; a step may not take the marker\'s stored id', async () => {
    const twice = defineTask({
      name: 'twice',
      payload: z.object({}),
      handler: async (_p, ctx) => {
        const first = ctx.patched('x');
        await ctx.step('a', () => 1);
        return [first, ctx.patched('x')];
      },
    });
    const s = createSkiplock({ sql: db.sql, tasks: [twice], log: quiet });
    const job = await s.enqueue({ task: 'twice', payload: {} });
    await s.tick({ untilIdle: true });
    expect(await s.getJob(job.id)).toMatchObject({ status: 'DONE', result: [true, true] });

    const clash = defineTask({
      name: 'clash',
      payload: z.object({}),
      handler: async (_p, ctx) => {
        ctx.patched('x');
        await ctx.step('patched:x', () => 1);
      },
    });
    const c = createSkiplock({ sql: db.sql, tasks: [clash], log: quiet });
    const bad = await c.enqueue({ task: 'clash', payload: {} });
    await c.tick({ untilIdle: true });
    expect(await c.getJob(bad.id)).toMatchObject({ status: 'DEAD', lastError: expect.stringMatching(/duplicate step id "patched:x"/) });
  });
});

describe('restartJob', () => {
  test('the trial: a deploy inserts a step before the recorded wait → DEAD on waking; restarted from it under the new code → DONE, the steps before it not run again', async () => {
    const job = await deploy('v1').enqueue({ task: 'order', payload: {} });
    await deploy('v1').tick({ untilIdle: true });
    clockAt = new Date(T0.getTime() + 2 * HOUR);
    const broken = deploy('v2-broken');
    await broken.tick({ untilIdle: true });
    const dead = (await broken.getJob(job.id))!;
    expect(dead.status).toBe('DEAD');
    expect(dead.lastError).toMatch(/step 1 was "wait" \(sleep\) in an earlier run, and is "fraud-check" \(step\) now/);
    // A retry dies the same way. fraud-check is not recorded: the new code, replayed, reaches it
    // after "reserve" and before the recorded "wait", so the restart keeps reserve and forgets wait.
    const restarted = await broken.restartJob(job.id, { fromStep: 'fraud-check' });
    expect(restarted).toMatchObject({ status: 'QUEUED', attempts: 0, stepCount: 1 });
    expect(await steps(job.id)).toEqual(['step:reserve:done']);
    await broken.tick({ untilIdle: true });
    expect(await steps(job.id)).toEqual(['step:reserve:done', 'step:fraud-check:done', 'sleep:wait:sleeping']);
    clockAt = new Date(T0.getTime() + 4 * HOUR);
    await broken.tick({ untilIdle: true });
    expect(await broken.getJob(job.id)).toMatchObject({ status: 'DONE', result: ['reserve', 'fraud-check', 'ship'] });
    expect(ran).toEqual(['v1:reserve', 'v2-broken:fraud-check', 'v2-broken:ship']);
  });

  test('404 for an unknown job or step, 409 while live (asleep, RUNNING) or once DONE, a bad fromStep refused; nothing written', async () => {
    const s = deploy('v1');
    const job = await s.enqueue({ task: 'order', payload: {} });
    await s.tick({ untilIdle: true });
    // Asleep (QUEUED): live, so a conflict, before its step is even looked for.
    await expect(s.restartJob(job.id, { fromStep: 'fraud-check' })).rejects.toMatchObject({ code: 'conflict', message: expect.stringMatching(/is WAITING: only a DEAD or CANCELLED job can be restarted/) });
    await s.cancelJob(job.id);
    await expect(s.restartJob('999999', { fromStep: 'wait' })).rejects.toMatchObject({ code: 'not_found' });
    await expect(s.restartJob('nope', { fromStep: 'wait' })).rejects.toMatchObject({ code: 'not_found' });
    // Neither recorded nor reached by the current code (v1 has no fraud-check).
    await expect(s.restartJob(job.id, { fromStep: 'fraud-check' })).rejects.toMatchObject({ code: 'not_found', message: expect.stringMatching(new RegExp(`^job ${job.id} has no step "fraud-check", and the current code of order does not reach`)) });
    expect(await steps(job.id)).toEqual(['step:reserve:done', 'sleep:wait:sleeping']);
    await expect(s.restartJob(job.id, { fromStep: '' })).rejects.toMatchObject({ code: 'invalid_request' });
    await db.sql.query(statement(`UPDATE skiplock.job SET status = 'RUNNING', finished_at = NULL, attempts = 1, locked_by = 'w', locked_until = now() WHERE id = $1`, [job.id]));
    await expect(s.restartJob(job.id, { fromStep: 'wait' })).rejects.toMatchObject({ code: 'conflict' });
    expect(await steps(job.id)).toEqual(['step:reserve:done', 'sleep:wait:sleeping']);
  });

  test('a WAITING parent: refused while live (409); cancelled (its children with it), then restarted before its invokes: it runs again and invokes new ones', async () => {
    const child = defineTask({ name: 'child', payload: z.object({ n: z.number() }), handler: ({ n }) => n * 10 });
    const parent = defineTask({
      name: 'parent',
      payload: z.object({}),
      handler: async (_p, ctx) => {
        await ctx.step('setup', () => { ran.push('setup'); return 1; });
        return Promise.all([1, 2].map((n) => ctx.invoke<number>(`c${n}`, 'child', { n })));
      },
    });
    // The children's task paused: they stay QUEUED while the parent waits.
    const parentOnly = createSkiplock({ sql: db.sql, tasks: [parent, child], log: quiet });
    await parentOnly.pauseTask('child');
    const job = await parentOnly.enqueue({ task: 'parent', payload: {} });
    await parentOnly.tick({ untilIdle: true });
    const p = (await parentOnly.getJobDetail(job.id))!;
    expect(p.status).toBe('WAITING');
    const oldChildren = p.children.map((c) => c.id);
    expect(oldChildren).toHaveLength(2);
    // A live job is not restarted (a restart sent twice would run its steps twice): cancel it first.
    await expect(parentOnly.restartJob(job.id, { fromStep: 'c1' })).rejects.toMatchObject({ code: 'conflict', message: expect.stringMatching(/is WAITING: only a DEAD or CANCELLED job can be restarted; .*cancel it first/) });
    expect((await parentOnly.getJob(job.id))!.status).toBe('WAITING');
    await parentOnly.cancelJob(job.id);
    const restarted = await parentOnly.restartJob(job.id, { fromStep: 'c1' });
    expect(restarted).toMatchObject({ status: 'QUEUED', pendingChildren: 0, stepCount: 1 });
    for (const id of oldChildren) expect((await parentOnly.getJob(id))!.status).toBe('CANCELLED');
    await parentOnly.resumeTask('child');
    await parentOnly.tick({ untilIdle: true });
    const after = (await parentOnly.getJobDetail(job.id))!;
    expect(after).toMatchObject({ status: 'DONE', result: [10, 20] });
    expect(after.children.filter((c) => !oldChildren.includes(c.id)).map((c) => c.status)).toEqual(['DONE', 'DONE']);
    expect(ran).toEqual(['setup']);
  });
});
