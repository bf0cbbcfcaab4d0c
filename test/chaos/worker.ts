/**
 * One chaos worker: a separate process running tick loops over a driver that fails and kills.
 * The harness (test/chaos/harness.ts) starts several, SIGKILLs them at random, and respawns them.
 * Faults it injects on itself, each with its own probability:
 *   - the driver fails a query before sending it, or after it ran (the answer is lost);
 *   - the process dies right after a claim, in the middle of a handler, or just before a result write;
 *   - its JS clock is skewed (Date.now and new Date()), which must change nothing: time is the database's.
 */
import { z } from 'zod';
import { createSkiplock, defineSchedule, defineTask } from '../../src/index.ts';
import { createPgDriver } from '../../src/store/drivers/pg.ts';
import { completeAndClaim } from '../../src/store/claim.ts';
import { statement, type Sql } from '../../src/store/sql.ts';
import { seededRandom } from './random.ts';

const env = (name: string, fallback: number) => Number(process.env[name] ?? fallback);
const WORKER = process.env.CHAOS_WORKER ?? 'w';
const rng = seededRandom(env('CHAOS_SEED', 1));
const faults = {
  failRate: env('CHAOS_FAIL_RATE', 0),
  killAfterClaim: env('CHAOS_KILL_AFTER_CLAIM', 0),
  killMidHandler: env('CHAOS_KILL_MID_HANDLER', 0),
  killBeforeWrite: env('CHAOS_KILL_BEFORE_WRITE', 0),
};
skewClock(env('CHAOS_CLOCK_SKEW_MS', 0));

const TICK_TEXT = completeAndClaim({ now: null, workerId: '', results: [], limit: 0, budgetMs: 0, leaseMs: 0, leaseGraceMs: 0, tasks: [] }).text;

function die(where: string): never {
  process.stderr.write(`[${WORKER}] injected crash ${where}\n`);
  process.kill(process.pid, 'SIGKILL');
  throw new Error('unreachable');
}

function faulty(sql: Sql): Sql {
  const maybeFail = (when: string) => {
    if (rng() < faults.failRate / 2) throw new Error(`injected fault: ${when}`);
  };
  return {
    async query(s) {
      const isTick = s.text === TICK_TEXT;
      if (isTick && s.values[2] !== '[]' && rng() < faults.killBeforeWrite) die('before a result write');
      maybeFail('connection refused');
      const rows = await sql.query(s);
      maybeFail('answer lost');
      if (isTick && rows.some((row) => row.id != null) && rng() < faults.killAfterClaim) die('after a claim');
      return rows as never;
    },
    async batch(statements) {
      maybeFail('connection refused');
      return sql.batch(statements);
    },
    close: () => sql.close(),
  };
}

const sql = faulty(createPgDriver(process.env.DATABASE_URL!, { max: 6, connectionTimeoutMillis: 2_000 }));

export const chaosTask = defineTask({
  name: 'chaos',
  payload: z.object({ n: z.number().int() }),
  timeoutMs: 2_000,
  maxAttempts: 1000,
  backoff: { baseMs: 50, maxMs: 500 },
  async handler(_payload, ctx) {
    if (rng() < faults.killMidHandler) die('in the middle of a handler');
    await new Promise((resolve) => setTimeout(resolve, rng() * 10));
    await sql.query(statement(`INSERT INTO chaos_execution (job_id, attempt, worker) VALUES ($1, $2, $3)`, [ctx.job.id, ctx.attempt, WORKER]));
    // The side effect, made idempotent the way handlers should: keyed by ctx.idempotencyKey.
    await sql.query(statement(`INSERT INTO chaos_ledger (key, job_id) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING`, [ctx.idempotencyKey, ctx.job.id]));
    return { attempt: ctx.attempt, worker: WORKER };
  },
});

/** A side effect made idempotent by its step's key; every run of the fn is counted too. */
async function keyedEffect(key: string, jobId: string) {
  await sql.query(statement(`INSERT INTO chaos_step_execution (key) VALUES ($1)`, [key]));
  await sql.query(statement(`INSERT INTO chaos_step_ledger (key, job_id) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING`, [key, jobId]));
}

export const chaosChild = defineTask({
  name: 'chaos-child',
  payload: z.object({ n: z.number().int() }),
  timeoutMs: 2_000,
  maxAttempts: 1000,
  backoff: { baseMs: 50, maxMs: 500 },
  async handler(payload, ctx) {
    if (rng() < faults.killMidHandler) die('in the middle of a child');
    await keyedEffect(ctx.idempotencyKey, ctx.job.id);
    return payload.n;
  },
});

/** A durable job: a step, a sleep (it leaves the invocation), two children awaited together, an event wait, a step. */
export const chaosSteps = defineTask({
  name: 'chaos-steps',
  payload: z.object({ n: z.number().int() }),
  timeoutMs: 2_000,
  maxAttempts: 1000,
  backoff: { baseMs: 50, maxMs: 500 },
  async handler(payload, ctx) {
    const a = await ctx.step('a', async (s) => {
      if (rng() < faults.killMidHandler * 5) die('inside a step');
      await keyedEffect(s.idempotencyKey, ctx.job.id);
      return payload.n;
    });
    await ctx.sleep('nap', Math.floor(rng() * 100));
    const children = await Promise.all([
      ctx.invoke<number>('left', 'chaos-child', { n: payload.n * 2 }),
      ctx.invoke<number>('right', 'chaos-child', { n: payload.n * 2 + 1 }),
    ]);
    if (children[0] !== payload.n * 2 || children[1] !== payload.n * 2 + 1) throw new Error(`wrong child results ${JSON.stringify(children)}`);
    // An event the harness sends at a random moment: before, during or after this wait is reached.
    const go = await ctx.waitForEvent<number>('go', { event: 'chaos.go', key: String(payload.n) });
    if (go?.data !== payload.n) throw new Error(`wrong event ${JSON.stringify(go)}`);
    const b = await ctx.step('b', async (s) => {
      await keyedEffect(s.idempotencyKey, ctx.job.id);
      return a + children[0]! + children[1]!;
    });
    return { attempt: ctx.attempt, b, event: go.data };
  },
});

// Every worker fires the same per-second schedule: duplicate and overlapping cron triggers.
const tickTask = defineTask({ name: 'chaos-cron', payload: z.object({}), timeoutMs: 1_000, maxAttempts: 1000, backoff: { baseMs: 50 }, handler: () => null });
const schedules = [defineSchedule({ name: 'chaos-every-second', cron: '* * * * * *', task: tickTask, catchUp: 'all' })];

const skiplock = createSkiplock({ sql, tasks: [chaosTask, chaosSteps, chaosChild, tickTask], schedules, log: process.env.CHAOS_DEBUG ? (level, message, fields) => console.error(level, message, fields) : () => {} });
let stopping = false;
const controller = new AbortController();
process.on('SIGTERM', () => {
  stopping = true;
  controller.abort();
});

const totals = { claimed: 0, done: 0, staleWrites: 0, reaped: 0, errors: 0 };
while (!stopping) {
  try {
    const r = await skiplock.tick({
      budgetMs: 5_000,
      concurrency: 10,
      pollIntervalMs: 50,
      leaseMs: 1_500,
      reapIntervalMs: 500,
      fireIntervalMs: 200,
      workerName: WORKER,
      signal: controller.signal,
      drainMs: 500,
    });
    totals.claimed += r.claimed;
    totals.done += r.done;
    totals.staleWrites += r.staleWrites;
    totals.reaped += r.reaped;
  } catch {
    totals.errors += 1;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
process.stdout.write(`${JSON.stringify({ worker: WORKER, ...totals })}\n`);
await sql.close();

function skewClock(skewMs: number) {
  if (skewMs === 0) return;
  const RealDate = Date;
  class SkewedDate extends RealDate {
    constructor(...args: unknown[]) {
      if (args.length === 0) super(RealDate.now() + skewMs);
      else super(...(args as [string]));
    }
    static override now() {
      return RealDate.now() + skewMs;
    }
  }
  globalThis.Date = SkewedDate as DateConstructor;
}
