import { Pool, neonConfig } from '@neondatabase/serverless';
import type { Sql } from '../sql.ts';
import { checkConnectionString } from './database-url.ts';
import { createPoolDriver, type PgPoolLike } from './pool.ts';

export interface NeonWsOptions {
  /** Routes WebSockets through a proxy, e.g. the local one; also turns off TLS to it. */
  wsProxy?: (host: string, port: number | string) => string;
  /** The WebSocket class where the runtime has none (Node < 22): `import ws from 'ws'`. */
  webSocketConstructor?: unknown;
  /** Pool size. Default 10. */
  max?: number;
}

/** Neon's WebSocket Pool: the `pg` protocol over a WebSocket, so the `pg` driver code applies. */
export function createNeonWsDriver(connectionString: string, options: NeonWsOptions = {}): Sql {
  checkConnectionString(connectionString, 'createNeonWsDriver');
  if (options.webSocketConstructor) neonConfig.webSocketConstructor = options.webSocketConstructor as never;
  if (options.wsProxy) {
    neonConfig.wsProxy = options.wsProxy;
    neonConfig.useSecureWebSocket = false;
    neonConfig.pipelineTLS = false;
    neonConfig.pipelineConnect = false;
  }
  const pool = new Pool({ connectionString, max: options.max ?? 10 });
  pool.on('error', () => {});
  // Unprepared, as before: through Neon's pooler, prepared statements depend on its settings.
  return createPoolDriver(pool as unknown as PgPoolLike, true, { preparedStatements: false });
}
