/**
 * The chaos run: N jobs processed by worker processes (test/chaos/worker.ts) while faults are
 * injected from outside (SIGKILLed workers, killed connections, PostgreSQL stopped and
 * restarted) and from inside each worker (failing driver, crashes at chosen points, skewed clocks).
 * Then it checks, as figures, that nothing was lost, stuck, applied twice or overwritten.
 */
import { seeded } from '../support/seed.ts';
import { spawn, type ChildProcess } from 'node:child_process';
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startLocalPostgres } from '../../src/dev/embedded-postgres.ts';
import { createSkiplock } from '../../src/runtime/skiplock.ts';
import { createPgDriver } from '../../src/store/drivers/pg.ts';
import { migrate } from '../../src/store/migrate.ts';
import { loadMigrations } from '../../src/store/migrations-fs.ts';
import { reapExpiredLeases } from '../../src/store/leases.ts';
import { statement, type Sql } from '../../src/store/sql.ts';
import { seededRandom } from './random.ts';

export interface ChaosOptions {
  jobs: number;
  /**
   * Durable-step jobs (task chaos-steps in worker.ts: a step, a sleep, two invoked children, a
   * step), besides `jobs`. Default 0.
   */
  stepJobs?: number;
  workers: number;
  seed: number;
  /** Mean time between SIGKILLs of a random worker (ms); 0 = none. */
  killEveryMs: number;
  /** Fraction of queries each worker's driver fails. */
  failRate: number;
  /** Per-event crash probabilities inside workers. */
  killAfterClaim: number;
  killMidHandler: number;
  killBeforeWrite: number;
  /** Stop PostgreSQL once, when this fraction of jobs is done, for `pgDownMs`. 0 = never. */
  restartPgAt: number;
  pgDownMs: number;
  /** Terminate a random share of server connections this often (ms); 0 = never. */
  terminateConnectionsEveryMs: number;
  /** Give up after this long (ms). */
  timeoutMs: number;
  /** Keep the workers (and their duplicate cron triggers) running until the per-second schedule fired this often. Default 0. */
  minCronFirings?: number;
  log?: (line: string) => void;
}

export interface ChaosReport {
  jobs: number;
  seed: number;
  done: number;
  lost: number;
  /** Jobs a worker held when it died or was stopped at the end: returned by the final reap. */
  reapedAtEnd: number;
  /** Jobs still RUNNING after that reap: stuck for good (must be 0). */
  stuckRunning: number;
  dead: number;
  duplicateSideEffects: number;
  duplicateExecutions: number;
  staleOverwrites: number;
  /** Durable-step jobs DONE (of stepJobs), their children DONE, and what went wrong with them (all must be 0). */
  stepJobsDone: number;
  stepChildrenDone: number;
  /** Steps or children whose keyed side effect is missing, or a step job not DONE. */
  stepLost: number;
  /** Invoke steps still waiting on a child that ended (a fan-in that never happened), or jobs left WAITING. */
  stepStuck: number;
  /** Step jobs whose result came from another run than the one that finished them. */
  stepStaleOverwrites: number;
  /** Runs of a step's fn beyond the first (a crash between the fn and its write): at-least-once. */
  stepReruns: number;
  /** Per-second cron instants between the first and the last firing that fired other than once. */
  cronInstantsNotOnce: number;
  cronFirings: number;
  workerKills: number;
  injectedCrashes: number;
  pgRestarts: number;
  recoveryAfterRestartMs: number | null;
  drainAfterLastFaultMs: number;
  totalMs: number;
}

const WORKER_FILE = fileURLToPath(new URL('./worker.ts', import.meta.url));

export async function runChaos(o: ChaosOptions): Promise<ChaosReport> {
  const log = o.log ?? (() => {});
  const rng = seededRandom(o.seed);
  const root = await mkdtemp(join(tmpdir(), 'skiplock-chaos-'));
  await chmod(root, 0o755);
  const pg = await startLocalPostgres({ dir: join(root, 'data'), persistent: true });
  const admin = createPgDriver(pg.url, { max: 2 });
  const started = performance.now();
  const workers = new Map<string, ChildProcess>();
  let stopping = false;
  let workerKills = 0;
  let injectedCrashes = 0;
  let pgRestarts = 0;
  let spawned = 0;
  let lastFault = performance.now();
  let recoveryAfterRestartMs: number | null = null;

  try {
    await migrate(admin, await loadMigrations());
    await admin.query(statement(`CREATE TABLE chaos_ledger (key text PRIMARY KEY, job_id bigint NOT NULL)`));
    await admin.query(statement(`CREATE TABLE chaos_execution (job_id bigint NOT NULL, attempt int NOT NULL, worker text NOT NULL)`));
    await admin.query(statement(`CREATE TABLE chaos_step_ledger (key text PRIMARY KEY, job_id bigint NOT NULL)`));
    await admin.query(statement(`CREATE TABLE chaos_step_execution (key text NOT NULL)`));
    if ((o.stepJobs ?? 0) > 0) {
      await admin.query(statement(
        seeded(`INSERT INTO skiplock.job_record (task, payload, max_attempts, timeout_ms) SELECT 'chaos-steps', jsonb_build_object('n', g), 1000, 2000 FROM generate_series(1, $1::int) g`),
        [o.stepJobs],
      ));
    }
    // The events the step jobs wait for (ctx.waitForEvent), sent at random moments of the run.
    const unsent = new Set(Array.from({ length: o.stepJobs ?? 0 }, (_, i) => i + 1));
    const sender = createSkiplock({ sql: admin, tasks: [], log: () => {}, retention: false });
    const sendSome = async () => {
      for (const n of [...unsent]) {
        if (rng() > 0.05) continue;
        try {
          await sender.sendEvent({ name: 'chaos.go', key: String(n), data: n, idempotencyKey: `chaos-go-${n}` });
          unsent.delete(n);
        } catch {
          // The database is down or the connection was cut: sent again later (the key makes it once).
        }
      }
    };
    for (let i = 0; i < o.jobs; i += 1000) {
      const n = Math.min(1000, o.jobs - i);
      await admin.query(statement(
        seeded(`INSERT INTO skiplock.job_record (task, payload, max_attempts, timeout_ms)
         SELECT 'chaos', jsonb_build_object('n', g), 1000, 2000 FROM generate_series($1::int, $2::int) g`),
        [i, i + n - 1],
      ));
    }

    const spawnWorker = () => {
      const name = `w${spawned++}`;
      const child = spawn(process.execPath, ['--experimental-strip-types', '--no-warnings', WORKER_FILE], {
        env: {
          ...process.env,
          DATABASE_URL: pg.url,
          CHAOS_WORKER: name,
          CHAOS_SEED: String(Math.floor(rng() * 2 ** 31)),
          CHAOS_FAIL_RATE: String(o.failRate),
          CHAOS_KILL_AFTER_CLAIM: String(o.killAfterClaim),
          CHAOS_KILL_MID_HANDLER: String(o.killMidHandler),
          CHAOS_KILL_BEFORE_WRITE: String(o.killBeforeWrite),
          // Clocks skewed by up to ±10 minutes: must not matter, time is the database's.
          CHAOS_CLOCK_SKEW_MS: String(Math.round((rng() * 2 - 1) * 600_000)),
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      child.stderr!.on('data', (chunk: Buffer) => {
        const text = chunk.toString();
        if (text.includes('injected crash')) injectedCrashes += text.split('injected crash').length - 1;
        else if (process.env.CHAOS_DEBUG) process.stderr.write(text);
      });
      child.on('exit', () => {
        workers.delete(name);
        if (!stopping) {
          lastFault = performance.now();
          spawnWorker();
        }
      });
      workers.set(name, child);
    };
    for (let i = 0; i < o.workers; i++) spawnWorker();

    const countDone = async () => {
      const [row] = await admin.query(statement(
        `SELECT count(*) FILTER (WHERE task = 'chaos' AND status = 'DONE')::int AS done,
                count(*) FILTER (WHERE task = 'chaos-steps' AND status <> 'DONE')::int AS steps_left
           FROM skiplock.job WHERE task IN ('chaos', 'chaos-steps')`,
      ));
      // The step jobs count as the last chaos job until they are all DONE.
      return Number(row!.done) - (Number(row!.steps_left) > 0 && Number(row!.done) === o.jobs ? 1 : 0);
    };

    let nextKill = performance.now() + o.killEveryMs * (0.5 + rng());
    let nextTerminate = performance.now() + o.terminateConnectionsEveryMs;
    let restarted = o.restartPgAt <= 0;
    let restartedAt = 0;
    let doneAtRestart = 0;
    let done = 0;
    while (done < o.jobs) {
      if (performance.now() - started > o.timeoutMs) throw new Error(`chaos run timed out with ${done}/${o.jobs} done`);
      await sleep(100);
      await sendSome();
      done = await countDone().catch((error: unknown) => (log(`progress query failed: ${String(error)}`), done));
      if (restartedAt && recoveryAfterRestartMs === null && done > doneAtRestart) recoveryAfterRestartMs = Math.round(performance.now() - restartedAt);
      if (o.killEveryMs > 0 && performance.now() >= nextKill && done < o.jobs * 0.9) {
        const victims = [...workers.values()];
        victims[Math.floor(rng() * victims.length)]?.kill('SIGKILL');
        workerKills += 1;
        nextKill = performance.now() + o.killEveryMs * (0.5 + rng());
      }
      if (o.terminateConnectionsEveryMs > 0 && performance.now() >= nextTerminate && done < o.jobs * 0.9) {
        await admin.query(statement(
          `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
            WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend' AND random() < 0.3`,
        )).catch(() => {});
        lastFault = performance.now();
        nextTerminate = performance.now() + o.terminateConnectionsEveryMs;
      }
      if (!restarted && done >= o.jobs * o.restartPgAt) {
        restarted = true;
        log(`stopping PostgreSQL for ${o.pgDownMs} ms at ${done}/${o.jobs} done`);
        await pg.restart(o.pgDownMs);
        pgRestarts += 1;
        restartedAt = performance.now();
        lastFault = restartedAt;
        doneAtRestart = await countDone();
      }
    }
    const drainAfterLastFaultMs = Math.round(performance.now() - lastFault);
    // A fast run can end before the duplicate cron triggers had much to race on.
    while ((await cronFiringCount(admin)) < (o.minCronFirings ?? 0)) {
      if (performance.now() - started > o.timeoutMs) throw new Error('chaos run timed out waiting for cron firings');
      await sleep(100);
    }

    stopping = true;
    await Promise.all([...workers.values()].map((child) => stopWorker(child)));
    return { ...(await verify(admin, o)), workerKills, injectedCrashes, pgRestarts, recoveryAfterRestartMs, drainAfterLastFaultMs, totalMs: Math.round(performance.now() - started) };
  } finally {
    stopping = true;
    for (const child of workers.values()) child.kill('SIGKILL');
    await admin.close();
    await pg.stop();
    await rm(root, { recursive: true, force: true });
  }
}

async function verify(sql: Sql, o: ChaosOptions) {
  // Every worker is gone. A job is RUNNING now only if a worker died holding it, or was stopped
  // (SIGKILL after 5 s) or failed its last write while shutting down: the reaper returns such a
  // job once its lease expires. Reap as of a minute from now, when every lease has; what is
  // RUNNING after that is stuck for good.
  const [later] = await sql.query<{ at: Date }>(statement(`SELECT now() + interval '1 minute' AS at`));
  const [reaped] = await sql.query(reapExpiredLeases({ now: new Date(later!.at), limit: 100_000 }));
  const [row] = await sql.query(statement(
    `SELECT
       count(*) FILTER (WHERE status = 'DONE')::int AS done,
       (SELECT count(*)::int FROM skiplock.job WHERE status = 'RUNNING') AS running,
       count(*) FILTER (WHERE status = 'DEAD')::int AS dead,
       count(*) FILTER (WHERE status = 'DONE' AND (result->>'attempt')::int <> attempts)::int AS stale_overwrites,
       (SELECT count(*)::int FROM (SELECT job_id FROM chaos_ledger GROUP BY job_id HAVING count(*) > 1) d) AS duplicate_side_effects,
       (SELECT count(*)::int FROM skiplock.job j WHERE j.task = 'chaos' AND NOT EXISTS (SELECT 1 FROM chaos_ledger l WHERE l.job_id = j.id)) AS missing_side_effects,
       (SELECT coalesce(sum(n - 1), 0)::int FROM (SELECT count(*) AS n FROM chaos_execution GROUP BY job_id) e) AS duplicate_executions
     FROM skiplock.job WHERE task = 'chaos'`,
  ));
  const r = row!;
  // Every second between the first and the last firing must have fired exactly once, with one job.
  const [cron] = await sql.query(statement(
    `SELECT count(*)::int AS firings,
            count(DISTINCT f.scheduled_for)::int AS instants,
            coalesce(extract(epoch FROM max(f.scheduled_for) - min(f.scheduled_for))::int + 1, 0) AS expected,
            count(DISTINCT f.job_id)::int AS jobs,
            (SELECT count(*)::int FROM skiplock.job j WHERE j.schedule_name = 'chaos-every-second') AS scheduled_jobs
       FROM skiplock.cron_firing f WHERE f.schedule_name = 'chaos-every-second'`,
  ));
  const c = cron!;
  const [steps] = await sql.query(statement(
    `SELECT
       count(*) FILTER (WHERE task = 'chaos-steps' AND status = 'DONE')::int AS done,
       count(*) FILTER (WHERE task = 'chaos-steps' AND (status <> 'DONE' OR (result->>'event')::int IS DISTINCT FROM (payload->>'n')::int))::int AS not_done,
       count(*) FILTER (WHERE task = 'chaos-child' AND status = 'DONE')::int AS children_done,
       count(*) FILTER (WHERE status = 'WAITING')::int AS waiting,
       count(*) FILTER (WHERE task = 'chaos-steps' AND status = 'DONE' AND (result->>'attempt')::int <> attempts)::int AS stale,
       (SELECT count(*)::int FROM skiplock.job_step s JOIN skiplock.job k ON k.id = s.child_id
         WHERE s.status = 'waiting' AND k.status IN ('DONE', 'DEAD', 'CANCELLED')) AS unfanned,
       (SELECT count(*)::int FROM chaos_step_ledger) AS effects,
       (SELECT count(*)::int - count(DISTINCT key) FROM chaos_step_execution) AS reruns
     FROM skiplock.job WHERE task IN ('chaos-steps', 'chaos-child')`,
  ));
  const st = steps!;
  const stepJobs = o.stepJobs ?? 0;
  const cronInstantsNotOnce =
    Number(c.expected) - Number(c.instants) + (Number(c.firings) - Number(c.instants)) + Math.abs(Number(c.scheduled_jobs) - Number(c.jobs)) + (Number(c.firings) - Number(c.jobs));
  return {
    cronInstantsNotOnce,
    cronFirings: Number(c.firings),
    jobs: o.jobs,
    seed: o.seed,
    done: Number(r.done),
    lost: o.jobs - Number(r.done) + Number(r.missing_side_effects),
    reapedAtEnd: Number(reaped?.reaped ?? 0),
    stuckRunning: Number(r.running),
    dead: Number(r.dead),
    duplicateSideEffects: Number(r.duplicate_side_effects),
    duplicateExecutions: Number(r.duplicate_executions),
    staleOverwrites: Number(r.stale_overwrites),
    stepJobsDone: Number(st.done),
    stepChildrenDone: Number(st.children_done),
    // Each step job: steps a and b, and two children, each with its keyed effect.
    stepLost: Number(st.not_done) + (4 * stepJobs - Number(st.effects)),
    stepStuck: Number(st.waiting) + Number(st.unfanned),
    stepStaleOverwrites: Number(st.stale),
    stepReruns: Number(st.reruns),
  };
}

async function cronFiringCount(sql: Sql): Promise<number> {
  const [row] = await sql.query(statement(`SELECT count(*)::int AS n FROM skiplock.cron_firing WHERE schedule_name = 'chaos-every-second'`));
  return Number(row?.n ?? 0);
}

function stopWorker(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve();
    const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
    child.on('exit', () => {
      clearTimeout(timer);
      resolve();
    });
    child.kill('SIGTERM');
  });
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
