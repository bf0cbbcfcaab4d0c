/**
 * The one PostgreSQL of a bench run: embedded, in a temp dir, deleted when stopped. It is
 * started once to write `shared_preload_libraries = pg_stat_statements` (ALTER SYSTEM), then
 * restarted on the same directory so the server counts every statement it runs, per database.
 */
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startLocalPostgres, type LocalPostgres } from '../../src/dev/embedded-postgres.ts';
import { createPgDriver } from '../../src/store/drivers/pg.ts';
import { migrate } from '../../src/store/migrate.ts';
import { loadMigrations } from '../../src/store/migrations-fs.ts';
import { statement } from '../../src/store/sql.ts';
import { postmasterPidOf } from './cpu.ts';

export interface BenchServer {
  adminUrl: string;
  /** Whether pg_stat_statements is loaded (server-side statement counts). */
  statStatements: boolean;
  version: string;
  /** The postmaster's pid, to read the server's CPU time (cpu.ts). */
  postmasterPid: number;
  /** Whether fsync (and synchronous_commit, full_page_writes) are on: a durable server. */
  durable: boolean;
  /** A new empty database, or a copy of the migrated skiplock template (or of a template made with createTemplate). */
  createDatabase(name: string, kind: 'skiplock' | 'empty' | { template: string }): Promise<string>;
  /** A template database migrated by `migrateIt` (ab.ts: another tree's migrations). */
  createTemplate(name: string, migrateIt: (url: string) => Promise<void>): Promise<void>;
  stop(): Promise<void>;
}

const TEMPLATE = 'bench_skiplock_template';

/**
 * `durable`: fsync, synchronous_commit and full_page_writes on, as a production server runs
 * (the default is the test server's settings: all three off). `settings`: more `-c` settings
 * (held-vacuum.ts: autovacuum's naptime).
 */
export async function startBenchServer(options: { durable?: boolean; settings?: Record<string, string> } = {}): Promise<BenchServer> {
  const settings: Record<string, string> = {
    ...(options.durable ? { fsync: 'on', synchronous_commit: 'on', full_page_writes: 'on' } : {}),
    ...options.settings,
  };
  const root = await mkdtemp(join(tmpdir(), 'skiplock-bench-'));
  await chmod(root, 0o755);
  const dir = join(root, 'data');
  let pg: LocalPostgres | undefined;
  try {
    const first = await startLocalPostgres({ dir, persistent: true });
    const setup = createPgDriver(first.url, { max: 1 });
    await setup.query(statement(`ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'`));
    await setup.query(statement(`ALTER SYSTEM SET pg_stat_statements.max = 10000`));
    await setup.query(statement(`ALTER SYSTEM SET pg_stat_statements.track_planning = on`));
    await setup.close();
    await first.stop();
    pg = await startLocalPostgres({ dir, port: first.port, persistent: false, settings });
    const admin = createPgDriver(pg.url, { max: 2 });
    let statStatements = true;
    await admin.query(statement(`CREATE EXTENSION IF NOT EXISTS pg_stat_statements`)).catch(() => (statStatements = false));
    const [v] = await admin.query<{ v: string }>(statement(`SELECT current_setting('server_version') AS v`));
    await admin.query(statement(`CREATE DATABASE ${TEMPLATE}`));
    const template = createPgDriver(pg.urlFor(TEMPLATE), { max: 1 });
    await migrate(template, await loadMigrations());
    await template.close();
    const server = pg;
    return {
      adminUrl: pg.url,
      statStatements,
      version: String(v?.v ?? '?'),
      postmasterPid: postmasterPidOf(dir),
      durable: options.durable ?? false,
      async createDatabase(name, kind) {
        const template = typeof kind === 'object' ? kind.template : kind === 'skiplock' ? TEMPLATE : 'template0';
        await admin.query(statement(`CREATE DATABASE ${name} TEMPLATE ${template}`));
        return server.urlFor(name);
      },
      async createTemplate(name, migrateIt) {
        await admin.query(statement(`CREATE DATABASE ${name}`));
        await migrateIt(server.urlFor(name));
      },
      async stop() {
        await admin.close();
        await server.stop();
        await rm(root, { recursive: true, force: true });
      },
    };
  } catch (error) {
    await pg?.stop().catch(() => {});
    await rm(root, { recursive: true, force: true });
    throw error;
  }
}
