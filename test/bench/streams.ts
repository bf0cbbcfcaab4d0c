/**
 * `npm run bench:streams` (or `npm run bench -- --streams`): what an open stream costs and how late
 * its chunks reach a reader (issue 34, docs/streams.md "Figures"). One embedded PostgreSQL; each
 * scenario on a fresh database, behind the local Neon proxy (src/dev/neon-proxy.ts: Neon's HTTP
 * /sql protocol, `roundTripMs` injected on every statement). Statements are counted at the proxy
 * (all of them) and on the writer's Sql port (the job's run: its claim, ctx.stream's flushes,
 * heartbeats, its result); the readers' (the HTTP app serving `GET /v1/jobs/:id/stream`) are the
 * difference. (One proxy: the Neon driver's fetchEndpoint is a module-wide setting.)
 *
 *   latency     a job writes a chunk `{ i, t }` every 50 ms; a reader over SSE takes `now − t` of each
 *               (writer, app and readers in this one process: one clock). Local (0 ms) and 20 ms.
 *   busy / idle statements a minute of one open stream while the job writes (every 50 ms) and
 *               while it is RUNNING but silent, at each side's proxy.
 *   readers     100 concurrent SSE readers of one job: latency p50/p99 and the readers' statements a minute.
 *
 * Writes test/bench/results/streams.{md,json}. BENCH_QUICK=1: shorter windows. No assertion here:
 * figures only (test/runtime/streams*.test.ts and the route's tests check behaviour).
 */
import { serve } from '@hono/node-server';
import { writeFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { cpus, loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import * as z from 'zod';
import { startNeonProxy } from '../../src/dev/neon-proxy.ts';
import { createApp } from '../../src/http/app.ts';
import { createSkiplock, defineTask } from '../../src/index.ts';
import { createNeonHttpDriver } from '../../src/store/drivers/neon-http.ts';
import { countingSql } from './harness.ts';
import { startBenchServer, type BenchServer } from './server.ts';

const QUICK = process.env.BENCH_QUICK === '1';
const TOKEN = 'bench-streams-token-0123456789';
const WRITE_EVERY_MS = 50;
const WINDOW_MS = QUICK ? 10_000 : 60_000;
const FAN_OUT = 100;
const log = (line: string) => console.error(`[bench:streams] ${line}`);

export interface StreamScenario {
  key: string;
  label: string;
  roundTripMs: number;
  readers: number;
  /** The job writes a chunk every WRITE_EVERY_MS (busy) or none while the window lasts (idle). */
  mode: 'busy' | 'idle';
  windowMs: number;
  /** Chunks every reader received (a reader that missed one would show here). */
  chunksPerReader: number[];
  latencyMs?: { p50: number; p99: number; max: number; n: number };
  /** Statements a minute over the window: the writer's flushes (ctx.stream), and the readers' (the app, all its readers). */
  writerPerMinute: number;
  readersPerMinute: number;
}

export interface StreamsBenchResults {
  date: string;
  quick: boolean;
  machine: { cpus: number; cpuModel: string; node: string; postgres: string; loadAverage: number[] };
  scenarios: StreamScenario[];
}

type Plan = Pick<StreamScenario, 'key' | 'label' | 'roundTripMs' | 'readers' | 'mode' | 'windowMs'>;

export const PLANS: readonly Plan[] = [
  { key: 'latency-local', label: 'write → reader latency, 1 reader, local (0 ms)', roundTripMs: 0, readers: 1, mode: 'busy', windowMs: WINDOW_MS },
  { key: 'latency-20ms', label: 'write → reader latency, 1 reader, 20 ms injected Neon latency', roundTripMs: 20, readers: 1, mode: 'busy', windowMs: WINDOW_MS },
  { key: 'idle-20ms', label: 'one open stream, the job RUNNING and silent, 20 ms', roundTripMs: 20, readers: 1, mode: 'idle', windowMs: WINDOW_MS },
  { key: 'readers-100-local', label: `${FAN_OUT} readers of one job, local (0 ms)`, roundTripMs: 0, readers: FAN_OUT, mode: 'busy', windowMs: WINDOW_MS },
  { key: 'readers-100-20ms', label: `${FAN_OUT} readers of one job, 20 ms`, roundTripMs: 20, readers: FAN_OUT, mode: 'busy', windowMs: WINDOW_MS },
];

/** The job: a chunk `{ i, t: Date.now() }` every WRITE_EVERY_MS for windowMs (busy), or silent for windowMs (idle); then returns. */
const benchTask = defineTask({
  name: 'bench-stream',
  payload: z.object({ mode: z.enum(['busy', 'idle']), windowMs: z.number().int() }),
  timeoutMs: 3 * 60_000,
  handler: async ({ mode, windowMs }, ctx) => {
    const out = ctx.stream();
    const end = Date.now() + windowMs;
    let i = 0;
    while (Date.now() < end) {
      if (mode === 'busy') out.write({ i: ++i, t: Date.now() });
      await new Promise((resolve) => setTimeout(resolve, mode === 'busy' ? WRITE_EVERY_MS : 250));
    }
    return { written: i };
  },
});

export async function runScenario(server: BenchServer, plan: Plan): Promise<StreamScenario> {
  const url = await server.createDatabase(`bench_streams_${plan.key.replace(/\W/g, '_')}_${Date.now()}`, 'skiplock');
  const proxy = await startNeonProxy({ roundTripMs: plan.roundTripMs });
  const counted = countingSql(createNeonHttpDriver(url, { fetchEndpoint: proxy.fetchEndpoint }));
  const writer = createSkiplock({ sql: counted.sql, tasks: [benchTask], log: () => {} });
  const reading = createSkiplock({ sql: createNeonHttpDriver(url, { fetchEndpoint: proxy.fetchEndpoint }), tasks: [benchTask], log: () => {} });
  const app = createApp({ skiplock: reading, apiToken: TOKEN });
  const http = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' });
  await new Promise<void>((resolve) => http.once('listening', resolve));
  const base = `http://127.0.0.1:${(http.address() as AddressInfo).port}`;
  try {
    const job = await writer.enqueue({ task: 'bench-stream', payload: { mode: plan.mode, windowMs: plan.windowMs } });
    const latencies: number[] = [];
    const readers = Array.from({ length: plan.readers }, () => readSse(`${base}/v1/jobs/${job.id}/stream`, latencies));
    await Promise.all(readers.map((r) => r.open));
    const all0 = proxy.sqlRequests();
    counted.reset();
    const started = performance.now();
    await writer.tick({ untilIdle: true, budgetMs: 5 * 60_000, pollIntervalMs: 50 });
    const windowMs = performance.now() - started;
    if ((await writer.getJob(job.id))?.status !== 'DONE') throw new Error(`${plan.key}: the job did not run to DONE in its tick`);
    const chunksPerReader = await Promise.all(readers.map((r) => r.done));
    const w = counted.counts.statements;
    // The writer's stream cost: its flush statements (the rest is this bench's tick polling for work every 50 ms).
    const flushes = Object.entries(counted.counts.byKind).filter(([kind]) => kind.startsWith('WITH fence AS')).reduce((n, [, c]) => n + c, 0);
    const r = proxy.sqlRequests() - all0 - w;
    latencies.sort((a, b) => a - b);
    return {
      ...plan,
      chunksPerReader: summarizeCounts(chunksPerReader),
      ...(latencies.length > 0 && { latencyMs: { p50: pct(latencies, 0.5), p99: pct(latencies, 0.99), max: latencies.at(-1)!, n: latencies.length } }),
      writerPerMinute: perMinute(flushes, windowMs),
      readersPerMinute: perMinute(r, windowMs),
    };
  } finally {
    await new Promise<void>((resolve) => {
      http.close(() => resolve());
      if ('closeAllConnections' in http) http.closeAllConnections();
    });
    await proxy.close();
  }
}

/**
 * One SSE reader (fetch, no EventSource in Node): `open` once the response's headers came, `done`
 * with the number of chunks at `event: end`. Each chunk's latency (now − its `t`) goes to `latencies`.
 */
function readSse(url: string, latencies: number[]): { open: Promise<void>; done: Promise<number> } {
  let opened!: () => void;
  const open = new Promise<void>((resolve) => (opened = resolve));
  const done = (async () => {
    const response = await fetch(url, { headers: { authorization: `Bearer ${TOKEN}`, accept: 'text/event-stream' } });
    if (!response.ok || !response.body) throw new Error(`stream: ${response.status} ${await response.text()}`);
    opened();
    let chunks = 0;
    let buffer = '';
    const decoder = new TextDecoder();
    for await (const bytes of response.body) {
      buffer += decoder.decode(bytes as Uint8Array, { stream: true });
      let cut: number;
      while ((cut = buffer.indexOf('\n\n')) >= 0) {
        const event = parseEvent(buffer.slice(0, cut));
        buffer = buffer.slice(cut + 2);
        if (event.event === 'end') return chunks;
        if (event.data === undefined) continue;
        const value = chunkValue(JSON.parse(event.data)) as { t?: number };
        if (typeof value?.t === 'number') latencies.push(Date.now() - value.t);
        chunks += 1;
      }
    }
    return chunks;
  })();
  done.catch(() => opened());
  return { open, done };
}

function parseEvent(text: string): { event?: string; id?: string; data?: string } {
  const out: { event?: string; id?: string; data?: string } = {};
  for (const line of text.split('\n')) {
    const colon = line.indexOf(':');
    if (colon <= 0) continue;
    const field = line.slice(0, colon);
    const value = line.slice(colon + 1).replace(/^ /, '');
    if (field === 'data') out.data = out.data === undefined ? value : `${out.data}\n${value}`;
    else if (field === 'event' || field === 'id') out[field] = value;
  }
  return out;
}

/** The value written, whether the route sends it bare or as `{ seq, data, at }`. */
function chunkValue(parsed: unknown): unknown {
  return parsed !== null && typeof parsed === 'object' && 'seq' in parsed && 'data' in parsed ? (parsed as { data: unknown }).data : parsed;
}

const pct = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]!;
const perMinute = (n: number, ms: number) => Math.round((n / ms) * 60_000 * 10) / 10;
/** [min, max] chunks per reader (one value when all agree). */
const summarizeCounts = (counts: number[]) => (Math.min(...counts) === Math.max(...counts) ? [counts[0]!] : [Math.min(...counts), Math.max(...counts)]);

export async function runStreamsBench(server: BenchServer, plans: readonly Plan[] = PLANS): Promise<StreamsBenchResults> {
  const load = [loadavg()[0]!];
  const scenarios: StreamScenario[] = [];
  for (const plan of plans) {
    log(`${plan.key}: ${plan.label} (${plan.windowMs / 1000} s)`);
    const result = await runScenario(server, plan);
    log(`${plan.key}: ${JSON.stringify({ latencyMs: result.latencyMs, writerPerMinute: result.writerPerMinute, readersPerMinute: result.readersPerMinute, chunksPerReader: result.chunksPerReader })}`);
    scenarios.push(result);
  }
  load.push(loadavg()[0]!);
  return {
    date: new Date().toISOString(),
    quick: QUICK,
    machine: { cpus: cpus().length, cpuModel: cpus()[0]?.model ?? '?', node: process.version, postgres: server.version, loadAverage: load.map((l) => Math.round(l * 100) / 100) },
    scenarios,
  };
}

export function streamsMarkdown(r: StreamsBenchResults): string {
  const ms = (v: number | undefined) => (v === undefined ? '—' : `${Math.round(v)} ms`);
  return [
    `# Streams: latency and cost per open stream (${r.date.slice(0, 10)}${r.quick ? ', quick run' : ''})`,
    '',
    `${r.machine.cpus} × ${r.machine.cpuModel}, Node ${r.machine.node}, PostgreSQL ${r.machine.postgres}, load average ${r.machine.loadAverage.join(' → ')}.`,
    'Rerun: `npm run bench:streams` (test/bench/streams.ts). Statements: all at the local Neon proxy; the writer\'s (the job\'s run) on its Sql port (its flush statements shown: the rest is the bench tick polling every 50 ms); the readers\' (the app serving `GET /v1/jobs/:id/stream`) the rest.',
    `Busy: the job writes a chunk every ${WRITE_EVERY_MS} ms. Writer, app and readers share this process (one clock).`,
    '',
    '| scenario | Neon latency | readers | write → read p50 | p99 | max | chunks per reader | writer\'s flushes/min | readers\' statements/min (all readers) |',
    '|---|---|---|---|---|---|---|---|---|',
    ...r.scenarios.map((s) => `| ${s.label} | ${s.roundTripMs} ms | ${s.readers} | ${ms(s.latencyMs?.p50)} | ${ms(s.latencyMs?.p99)} | ${ms(s.latencyMs?.max)} | ${s.chunksPerReader.join('–')} | ${s.writerPerMinute} | ${s.readersPerMinute} |`),
    '',
  ].join('\n');
}

export async function writeStreamsResults(r: StreamsBenchResults): Promise<string[]> {
  const md = fileURLToPath(new URL('./results/streams.md', import.meta.url));
  const json = fileURLToPath(new URL('./results/streams.json', import.meta.url));
  await writeFile(md, streamsMarkdown(r));
  await writeFile(json, `${JSON.stringify(r, null, 2)}\n`);
  return [md, json];
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const only = process.env.BENCH_ONLY?.split(',').map((s) => s.trim());
  const server = await startBenchServer();
  try {
    const results = await runStreamsBench(server, only ? PLANS.filter((p) => only.includes(p.key)) : PLANS);
    if (only) process.stdout.write(streamsMarkdown(results));
    else log(`written: ${(await writeStreamsResults(results)).join(', ')}`);
  } finally {
    await server.stop();
  }
}
