/**
 * Vercel's timer, measured (issue 31 item 3): with NO cron, how late after its due instant does a
 * job delayed 20 s start, and a workflow sleeping 15 s resume, when the only wake-up is a Vercel
 * Queues message (src/platform/vercel/queue-timer.ts)? The handler (createVercelHandler, the
 * Neon HTTP driver through the local Neon proxy, the Runtime Cache's in-memory fallback as under
 * `next start`) serves HTTP on a real port; the real @vercel/queue SDK sends to the local stand-in
 * of the Queue Service (src/dev/queue-service.ts), which pushes back to the handler at the delay's
 * end. Lateness is read from the database (started_at − run_at, one clock).
 *
 *   node_modules/.bin/node --experimental-strip-types test/platform/measure-vercel-queue.ts [RUNS]
 */
import { mkdtemp, rm } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { serve } from '@hono/node-server';
import * as vercelQueue from '@vercel/queue';
import { z } from 'zod';
import { startLocalPostgres } from '../../src/dev/embedded-postgres.ts';
import { startNeonProxy } from '../../src/dev/neon-proxy.ts';
import { startQueueService } from '../../src/dev/queue-service.ts';
import { createVercelHandler } from '../../src/platform/vercel/index.ts';
import { defineTask } from '../../src/runtime/tasks/task.ts';
import { createPgDriver } from '../../src/store/drivers/pg.ts';
import { migrate } from '../../src/store/migrate.ts';
import { migrations } from '../../src/store/migrations-data.ts';
import { statement } from '../../src/store/sql.ts';

const RUNS = Number(process.argv[2] ?? 5);
const quick = defineTask({ name: 'quick', payload: z.object({}), timeoutMs: 1_000, handler: () => ({ ok: true }) });
const napper = defineTask({
  name: 'napper',
  payload: z.object({}),
  timeoutMs: 1_000,
  handler: async (_p, ctx) => {
    await ctx.sleep('nap', 15_000);
    return { woke: true };
  },
});

const root = await mkdtemp(join(tmpdir(), 'skiplock-queue-measure-'));
const pg = await startLocalPostgres({ dir: join(root, 'data'), persistent: false });
const admin = createPgDriver(pg.url, { max: 1 });
await admin.query(statement(`CREATE DATABASE measure`));
await admin.close();
const url = pg.urlFor('measure');
const sql = createPgDriver(url, { max: 2 });
await migrate(sql, migrations);
const proxy = await startNeonProxy();
let handler: ReturnType<typeof createVercelHandler> | undefined;
const server = serve({ fetch: (request: Request) => handler!.fetch(request), port: 0, hostname: '127.0.0.1', overrideGlobalObjects: false });
await new Promise((resolve) => server.once('listening', resolve));
const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
const queue = await startQueueService({ consumers: { 'skiplock-wake': `${base}/v1/tick` } });
handler = createVercelHandler({
  tasks: [quick, napper],
  maxDuration: 60,
  queue: { sdk: vercelQueue },
  env: { DATABASE_URL: url, NEON_FETCH_ENDPOINT: proxy.fetchEndpoint, API_TOKEN: 'measure-token-0123456789', SKIPLOCK_QUEUE_URL: queue.url, SKIPLOCK_QUEUE_TOKEN: queue.token },
});

try {
  const skiplock = handler.skiplock();
  const ids: { kind: 'delay 20 s' | 'sleep 15 s'; id: string }[] = [];
  // Every due instant stands alone (≥ 3 s from any other: a push's tick waits up to 2 s for the
  // next instant, which would measure a chain), and the runs are spread over the second (the
  // delay is rounded up to it), so every phase of it is measured.
  for (let i = 0; i < RUNS; i += 1) {
    ids.push({ kind: 'sleep 15 s', id: (await skiplock.enqueue({ task: 'napper', payload: {} })).id });
    ids.push({ kind: 'delay 20 s', id: (await skiplock.enqueue({ task: 'quick', payload: {}, delayMs: 20_000 })).id });
    if (i < RUNS - 1) await new Promise((resolve) => setTimeout(resolve, 10_000 + 1_000 / RUNS));
  }
  const lateness: Record<string, number[]> = { 'delay 20 s': [], 'sleep 15 s': [] };
  const deadline = Date.now() + 120_000;
  for (const { kind, id } of ids) {
    for (;;) {
      const [r] = await sql.query(statement(`SELECT status, run_at, started_at FROM skiplock.job WHERE id = $1`, [id]));
      if (r!.status === 'DONE') {
        lateness[kind]!.push((r!.started_at as Date).getTime() - (r!.run_at as Date).getTime());
        break;
      }
      if (Date.now() > deadline) throw new Error(`job ${id} (${kind}) still ${String(r!.status)} a minute later`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
  for (const [kind, values] of Object.entries(lateness)) {
    values.sort((a, b) => a - b);
    console.log(`${kind}, no cron, Vercel Queues stand-in: start after due p50 ${values[Math.floor((values.length - 1) / 2)]} ms, max ${values.at(-1)} ms (n=${values.length}; all: ${values.join(', ')})`);
  }
  const stats = queue.stats();
  console.log(`Queue Service: ${stats.sends} sends (${stats.duplicates} duplicates), ${stats.pushes} pushes, ${stats.acks} acknowledgements`);
} finally {
  await queue.close();
  server.close();
  await proxy.close();
  await sql.close();
  await pg.stop();
  await rm(root, { recursive: true, force: true });
}
