/**
 * `npm run bench:neon`: a simulated month of Neon compute under its 5-minute suspend rule
 * (neon-rule.ts), before and after the wake state, for three profiles (neon-profiles.ts).
 *
 * After: the real skiplock (createSkiplock, tickIfDue, the memory wake store) against an embedded
 * PostgreSQL, with one injected clock for both the database's `now` and the platform's, driven
 * through a simulated UTC day as the Durable Object ticker drives it: the minute cron (a safety
 * net: tickIfDue, no statement unless due), an alarm at the wake state's next instant, and each
 * batch of arrivals enqueued (its due-work hook starts a tick at once). A wrapper around the Sql
 * port records the simulated instant of every statement. Handlers take no simulated time.
 * Retention is on (defaults: 7 days), over a seeded week of finished jobs shaped like the profile.
 *
 * Before: the minute cron ticking for 70 s and claiming each second. Its statement cadence is
 * measured from the real tick (a few seconds of it, idle, in real time); the day is that cadence
 * from every minute's start for 70 s: the compute never suspends, whatever the traffic.
 *
 * A day is replayed and counted as a month of identical days (730 h). Writes
 * test/bench/results/neon-compute.{md,json}.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startLocalPostgres } from '../../src/dev/embedded-postgres.ts';
import { createSkiplock, type Skiplock } from '../../src/runtime/skiplock.ts';
import { defineSchedule } from '../../src/runtime/schedules/definition.ts';
import { defineTask } from '../../src/runtime/tasks/task.ts';
import { createMemoryWakeStore } from '../../src/runtime/wake/state.ts';
import { createPgDriver } from '../../src/store/drivers/pg.ts';
import { migrate } from '../../src/store/migrate.ts';
import { migrations } from '../../src/store/migrations-data.ts';
import { statement, type Sql } from '../../src/store/sql.ts';
import { z } from 'zod';
import { computeUse, perMonth, type ComputeUse } from './neon-rule.ts';
import { arrivals, PROFILES, type Profile } from './neon-profiles.ts';

const DAY = 24 * 3_600_000;
/** The simulated day: a Monday, midnight UTC. */
const BASE = Date.parse('2026-06-01T00:00:00Z');
const HOUR = 3_600_000;
/** idleCheckMs settings compared on the idle profile (defaults: 24 h with the Durable Object, 1 h elsewhere). */
const IDLE_CHECKS = [0, 24 * HOUR, 12 * HOUR, 6 * HOUR, HOUR, 15 * 60_000, 5 * 60_000];
/** The defaults, compared on the other profiles. */
const DEFAULTS = [24 * HOUR, HOUR];

const work = defineTask({ name: 'work', payload: z.object({}), timeoutMs: 5_000, handler: () => ({ ok: true }) });
const daily = defineSchedule({ name: 'daily-report', cron: '0 5 * * *', task: work, payload: {} });

/** The Sql port, recording the (simulated) instant of each statement. */
function recording(sql: Sql, clock: () => number, times: number[]): Sql {
  return {
    query: (s) => (times.push(clock()), sql.query(s)),
    batch: (s) => (times.push(clock()), sql.batch(s)),
    close: () => sql.close(),
  };
}

/** A min-heap of instants would do; the day has a few thousand events, so a sorted insert does. */
class Timeline {
  #events: { at: number; run: () => Promise<void> }[] = [];
  add(at: number, run: () => Promise<void>) {
    let i = this.#events.length;
    while (i > 0 && this.#events[i - 1]!.at > at) i -= 1;
    this.#events.splice(i, 0, { at, run });
  }
  next() {
    return this.#events.shift();
  }
}

/** A week of finished jobs before the day, one per minute of the profile's traffic (and the schedule's): what retention deletes. */
async function seedHistory(sql: Sql, profile: Profile): Promise<void> {
  const minutes: number[] = [];
  for (let m = 0; m < 24 * 60; m += 1) if (profile.rate(m * 60_000) > 0 || m === 5 * 60) minutes.push(m);
  await sql.query(
    statement(
      `INSERT INTO skiplock.job_record (task, payload, status, attempts, max_attempts, timeout_ms, finished_at, run_at, created_at, updated_at)
       SELECT 'work', '{}', 'DONE', 1, 5, 10000, at, at, at, at
         FROM generate_series(1, 7) AS d, unnest($2::int[]) AS m, LATERAL (SELECT $1::timestamptz - d * interval '1 day' + m * interval '1 minute' AS at) x`,
      [new Date(BASE).toISOString(), minutes],
    ),
  );
}

/**
 * One simulated day of the wake-state deployment: the instants of its statements, and how many
 * timer wake-ups it armed (an alarm on Cloudflare; a delayed Vercel Queues message on Vercel).
 */
async function simulateAfter(url: string, profile: Profile, idleCheckMs: number): Promise<{ times: number[]; armed: number }> {
  const base = createPgDriver(url, { max: 4 });
  await base.query(statement(`TRUNCATE skiplock.job_record, skiplock.queue, skiplock.schedule CASCADE`));
  await seedHistory(base, profile);
  let t = BASE;
  // Process-local rate limits (retention's once a minute) count with performance.now(): it moves
  // with the simulated clock too, so that a pass hours later is not refused as "a second ago".
  const realNow = performance.now.bind(performance);
  performance.now = () => realNow() + (t - BASE);
  const times: number[] = [];
  const timeline = new Timeline();
  let alarmAt: number | null = null;
  let armed = 0;
  const setAlarm = (at: number | null) => {
    if (at === null || (alarmAt !== null && alarmAt <= at)) return;
    alarmAt = at;
    if (at > t) armed += 1; // a wake-up later: a timer (due now runs in the invocation itself)
    timeline.add(at, async () => {
      if (alarmAt !== at) return; // replaced by an earlier one
      alarmAt = null;
      await invoke();
    });
  };
  let skiplock!: Skiplock;
  const invoke = async () => {
    const r = await skiplock.tickIfDue({ budgetMs: 25_000, untilIdle: true });
    if (process.env.NEON_DEBUG && r.ticked) console.log(new Date(t).toISOString(), r.reason, r.nextAtMs === null ? null : new Date(r.nextAtMs).toISOString(), JSON.stringify(r.result));
    setAlarm(r.nextAtMs);
  };
  skiplock = createSkiplock({
    sql: recording(base, () => t, times),
    tasks: [work],
    schedules: [daily],
    now: () => new Date(t),
    idleCheckMs,
    // The Durable Object: due now → a tick in this invocation; later → its alarm.
    wake: { store: createMemoryWakeStore(), now: () => t, onDueWork: (atMs) => setAlarm(Math.max(atMs, t)) },
  });
  for (let m = 0; m < 24 * 60; m += 1) timeline.add(BASE + m * 60_000, invoke); // the minute cron
  for (const [at, n] of arrivals(profile)) timeline.add(BASE + at, async () => void (await skiplock.enqueueBatch(Array.from({ length: n }, () => ({ task: 'work', payload: {} })))));
  for (let event = timeline.next(); event && event.at < BASE + DAY; event = timeline.next()) {
    t = event.at;
    await event.run();
  }
  performance.now = realNow;
  await base.close();
  return { times, armed };
}

/** The old minute cron's idle cadence, from the real tick: statement instants of `ms` of ticking, relative to its start. */
async function measureBeforeCadence(url: string, ms: number): Promise<number[]> {
  const sql = createPgDriver(url, { max: 2 });
  await sql.query(statement(`TRUNCATE skiplock.job_record, skiplock.queue, skiplock.schedule CASCADE`));
  const offsets: number[] = [];
  const start = performance.now();
  const skiplock = createSkiplock({ sql: recording(sql, () => performance.now() - start, offsets), tasks: [work], schedules: [daily] });
  await skiplock.tick({ budgetMs: ms, pollIntervalMs: 1_000 });
  await sql.close();
  return offsets;
}

/** Every minute's 70 s invocation, each repeating the measured cadence. */
function modelBefore(cadence: readonly number[], measuredMs: number): number[] {
  const times: number[] = [];
  for (let m = 0; m < 24 * 60; m += 1) {
    for (let offset = 0; offset < 70_000; offset += measuredMs) {
      for (const c of cadence) if (offset + c < 70_000) times.push(BASE + m * 60_000 + offset + c);
    }
  }
  return times;
}

interface Row {
  profile: string;
  label: string;
  idleCheckMs: number;
  before: ComputeUse;
  after: ComputeUse;
  /** Timer wake-ups armed in a month (alarms; Vercel Queues delayed messages). */
  timersPerMonth: number;
}

async function main() {
  const root = await mkdtemp(join(tmpdir(), 'skiplock-neon-'));
  const pg = await startLocalPostgres({ dir: join(root, 'data'), persistent: false });
  try {
    const admin = createPgDriver(pg.url, { max: 1 });
    await admin.query(statement(`CREATE DATABASE neon_sim`));
    await admin.close();
    const url = pg.urlFor('neon_sim');
    const setup = createPgDriver(url, { max: 1 });
    await migrate(setup, migrations);
    await setup.close();

    const MEASURED_MS = 6_000;
    const cadence = await measureBeforeCadence(url, MEASURED_MS);
    const before = perMonth(computeUse(modelBefore(cadence, MEASURED_MS), BASE, BASE + DAY));
    console.log(`before: the real tick made ${cadence.length} statements in ${MEASURED_MS / 1000} s of idle ticking`);

    const rows: Row[] = [];
    for (const profile of PROFILES.filter((p) => !process.env.NEON_ONLY || p.name === process.env.NEON_ONLY)) {
      for (const idleCheckMs of process.env.NEON_ONLY ? [HOUR] : profile.name === 'idle' ? IDLE_CHECKS : DEFAULTS) {
        const started = performance.now();
        const simulated = await simulateAfter(url, profile, idleCheckMs);
        const after = perMonth(computeUse(simulated.times, BASE, BASE + DAY));
        rows.push({ profile: profile.name, label: profile.label, idleCheckMs, before, after, timersPerMonth: Math.round((simulated.armed * 730) / 24) });
        console.log(`${profile.name} idleCheckMs=${idleCheckMs}: ${after.statements} statements/month, ${after.cuHours.toFixed(1)} CU-h (${((performance.now() - started) / 1000).toFixed(0)} s)`);
      }
    }
    await writeReport(rows, cadence.length, MEASURED_MS);
  } finally {
    await pg.stop();
    await rm(root, { recursive: true, force: true });
  }
}

const hours = (u: ComputeUse) => (u.activeMs / HOUR).toFixed(1);
/** Vercel Queues operations per delayed message: send with an idempotency key (2), notify (1), delete (1). */
const OPERATIONS_PER_MESSAGE = 4;
const queueOperations = (messages: number) => {
  const operations = messages * OPERATIONS_PER_MESSAGE;
  return `${operations.toLocaleString('en')} ($${((operations / 1_000_000) * 0.6).toFixed(2)})`;
};
const setting = (ms: number) => (ms === 0 ? '0 (off)' : ms >= HOUR ? `${ms / HOUR} h` : `${ms / 60_000} min`);

async function writeReport(rows: Row[], cadenceStatements: number, measuredMs: number) {
  const lines = [
    '# Neon compute, a simulated month (issues 22 and 31)',
    '',
    `Generated by \`npm run bench:neon\` (test/bench/neon-compute.ts) on ${new Date().toISOString().slice(0, 10)}. Neon's rule: a compute is active from a statement until 5 minutes after the last one; 0.25 CU; a month is 730 h of identical days.`,
    `Before: the minute cron ticking 70 s and claiming each second (the real tick made ${cadenceStatements} statements in ${measuredMs / 1000} s idle). After: the real skiplock with the wake state, its statements replayed (idleCheckMs as given; Durable Object ticker: minute cron + alarm at the next due instant).`,
    '',
    '| profile | idleCheckMs | statements/month before → after | active h/month before → after | CU-hours/month before → after | compute starts/month after | timer wake-ups/month | Vercel Queues operations/month (price) |',
    '|---|---|---|---|---|---|---|---|',
    ...rows.map((r) =>
      `| ${r.label} | ${setting(r.idleCheckMs)} | ${r.before.statements.toLocaleString('en')} → ${r.after.statements.toLocaleString('en')} | ${hours(r.before)} → ${hours(r.after)} | ${r.before.cuHours.toFixed(1)} → ${r.after.cuHours.toFixed(1)} | ${r.after.starts.toLocaleString('en')} | ${r.timersPerMonth.toLocaleString('en')} | ${queueOperations(r.timersPerMonth)} |`),
    '',
    `Timer wake-ups: the instants the Durable Object's alarm was armed for (later than the invocation that armed it). On Vercel each is a delayed Vercel Queues message: ${OPERATIONS_PER_MESSAGE} operations (a send with an idempotency key counts twice, the push delivery once, its acknowledgement once) at $0.60 per million, the first million a month included on every plan.`,
    '',
  ];
  const dir = fileURLToPath(new URL('./results/', import.meta.url));
  await writeFile(join(dir, 'neon-compute.md'), lines.join('\n'));
  await writeFile(join(dir, 'neon-compute.json'), `${JSON.stringify(rows, null, 2)}\n`);
  console.log(lines.join('\n'));
}

await main();
