import { z } from 'zod';
import { createSkiplock } from '../../src/runtime/skiplock.ts';
import { defineTask } from '../../src/runtime/task.ts';
import { createPgDriver } from '../../src/store/drivers/pg.ts';
import { startBenchServer } from './server.ts';
import { enqueueMany } from './skiplock.ts';
const TICKS = Number(process.env.TICKS) || 96;
const server = await startBenchServer();
try {
  const url = await server.createDatabase('p96', 'skiplock');
  const sql = createPgDriver(url, { max: TICKS + 1 });
  const logs: Record<string, number> = {};
  const noop = defineTask({ name: 'noop', payload: z.object({}), handler: () => {} });
  const sk = createSkiplock({ sql, tasks: [noop], retention: false, log: (level: string, msg: string, f?: unknown) => { const k = `${level} ${msg} ${JSON.stringify(f).slice(0, 160)}`; logs[k] = (logs[k] ?? 0) + 1; } });
  await enqueueMany(sk, 'noop', Number(process.env.JOBS) || 10_000);
  const t0 = performance.now();
  const rs = await Promise.all(Array.from({ length: TICKS }, () => sk.tick({ untilIdle: true, concurrency: 25, budgetMs: 600_000 })));
  console.log(`${TICKS} ticks: ${Math.round((Number(process.env.JOBS) || 10000) / (performance.now() - t0) * 1000)} jobs/s, done ${rs.reduce((a, r) => a + r.done, 0)}`);
  console.log(Object.entries(logs).slice(0, 10));
  await sql.close();
} finally { await server.stop(); }
