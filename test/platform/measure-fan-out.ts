/**
 * maxParallelTicks, measured in workerd (wrangler dev, this repository's Worker, the Durable
 * Object ticker, the Neon HTTP driver through the local proxy; uncomment the SKIPLOCK_SELF
 * binding in wrangler.toml first): a backlog of JOBS `sleep` jobs of
 * 200 ms (I/O-bound: a timer), written by SQL behind the Worker's back, then one minute-cron
 * invocation. For each MAX_PARALLEL_TICKS: drain time, statements (the database's committed
 * transactions, minus this script's own polls); the Worker's '[skiplock] backlog' lines, printed
 * before each result, count the fan-out rounds. Not a test: run by hand (the figures are in docs/platforms.md).
 *
 *   node --experimental-strip-types test/platform/measure-fan-out.ts [parallel ...]
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, startLocalPostgres } from '../../src/dev/embedded-postgres.ts';
import { startNeonProxy } from '../../src/dev/neon-proxy.ts';
import { startWranglerDev } from '../../src/dev/wrangler-dev.ts';
import { createPgDriver } from '../../src/store/drivers/pg.ts';
import { seeded } from '../support/seed.ts';
import { migrate } from '../../src/store/migrate.ts';
import { migrations } from '../../src/store/migrations-data.ts';
import { statement } from '../../src/store/sql.ts';

const JOBS = Number(process.env.JOBS) || 2_000;
const PARALLEL = process.argv.slice(2).map(Number).filter((n) => n > 0);

const root = await mkdtemp(join(tmpdir(), 'skiplock-fanout-'));
const pg = await startLocalPostgres({ dir: join(root, 'data'), persistent: false });
const proxy = await startNeonProxy();
try {
  const admin = createPgDriver(pg.url, { max: 1 });
  await admin.query(statement(`CREATE DATABASE fanout`));
  await admin.close();
  const url = pg.urlFor('fanout');
  const sql = createPgDriver(url, { max: 2 });
  await migrate(sql, migrations);
  const commits = async () => Number((await sql.query<{ n: string }>(statement(`SELECT xact_commit::text AS n FROM pg_stat_database WHERE datname = 'fanout'`)))[0]!.n);
  for (const parallel of PARALLEL.length > 0 ? PARALLEL : [1, 4, 8]) {
    await sql.query(statement(`TRUNCATE skiplock.job_record, skiplock.queue CASCADE`));
    const state = await mkdtemp(join(root, 'wrangler-'));
    const worker = await startWranglerDev({
      port: await freePort(),
      persistTo: state,
      stdio: 'inherit', // its '[skiplock] backlog' lines count the fan-out rounds
      vars: { DATABASE_URL: url, NEON_FETCH_ENDPOINT: proxy.fetchEndpoint, API_TOKEN: 'measure-token-0123456789', MAX_PARALLEL_TICKS: String(parallel), TICKER: 'alarm' },
    });
    try {
      // timeout 2 s: a fan-out invocation started late in the alarm's 25 s can still claim them.
      await sql.query(statement(seeded(`INSERT INTO skiplock.job_record (task, payload, timeout_ms, max_attempts, run_at, created_at, updated_at)
        SELECT 'sleep', '{"ms":200}', 2000, 5, now(), now(), now() FROM generate_series(1, $1::int)`), [JOBS]));
      let polls = 0;
      const before = await commits();
      const started = performance.now();
      const cron = fetch(`${worker.url}/cdn-cgi/handler/scheduled?cron=*+*+*+*+*`).then((r) => r.text());
      for (;;) {
        polls += 1;
        const [row] = await sql.query<{ done: number }>(statement(`SELECT count(*) FILTER (WHERE status = 'DONE')::int AS done FROM skiplock.job`));
        if (process.env.VERBOSE && polls % 4 === 0) console.log(`${((performance.now() - started) / 1000).toFixed(1)} s: ${row!.done} done`);
        if (row!.done >= JOBS) break;
        if (performance.now() - started > 600_000) throw new Error(`not drained after 10 min: ${row!.done} done`);
        await new Promise((r) => setTimeout(r, 250));
      }
      const drainMs = performance.now() - started;
      await cron;
      await new Promise((r) => setTimeout(r, 2_000)); // the statistics of other sessions are flushed within a second or so
      const statements = (await commits()) - before - polls - 1;
      console.log(JSON.stringify({ maxParallelTicks: parallel, jobs: JOBS, drainS: +(drainMs / 1000).toFixed(1), jobsPerS: Math.round(JOBS / (drainMs / 1000)), statements }));
    } finally {
      await worker.stop();
      await rm(state, { recursive: true, force: true });
    }
  }
  await sql.close();
} finally {
  await proxy.close();
  await pg.stop();
  await rm(root, { recursive: true, force: true });
}
