/**
 * Writes a bench run as test/bench/results/latest.json (everything), latest.md (the tables and
 * the targets) and throughput.svg (a bar chart, hand-written SVG).
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import type { ClaimStepResult } from './claim-latency.ts';
import { claimStatementStats, type LatencyResult, type ThroughputResult } from './harness.ts';
import type { MemoryResult } from './skiplock.ts';

export interface ThroughputSummary extends ThroughputResult {
  key: string;
  /** jobs/s of each round; `jobsPerSec` is their median, the other fields are the median round's. */
  rounds: number[];
  /** The 1-minute load average as each round started (the machine is shared). */
  loads?: number[];
}

export interface BenchResults {
  date: string;
  quick: boolean;
  machine: { cpus: number; cpuModel: string; memoryGb: number; node: string; postgres: string; loadAverage: number[] };
  params: { jobs: number; concurrency: number; rounds: number; latency: { rate: number; samples: number }; memoryBacklog: number; curveJobs?: number };
  roundTripCounting: string;
  throughput: ThroughputSummary[];
  /** The concurrency curve (issue 17): 1–96 concurrent ticks, the raw floors and the peers, at a 100k backlog. */
  curve?: ThroughputSummary[];
  /** The main configurations again on a server with fsync on. */
  fsyncOn?: ThroughputSummary[];
  neonHttp: { summary?: ThroughputSummary; note?: string };
  /** One tick over the Neon HTTP driver with an injected round-trip time (issue 23); absent when not run. */
  neonRoundTrips?: NeonRoundTripResult[];
  latency: LatencyResult[];
  claimLatency: ClaimStepResult[];
  memory: MemoryResult | undefined;
  /** The flow-control scenarios (`npm run bench -- --flow`); absent when not run. */
  flow?: ThroughputSummary[];
  seconds: number;
}

export interface NeonRoundTripResult { roundTripMs: number; concurrency: number; summary: ThroughputSummary }

export const RESULTS_DIR = fileURLToPath(new URL('./results/', import.meta.url));

const fmt = (n: number | undefined, digits = 0) =>
  n === undefined || Number.isNaN(n) ? '–' : n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });

/** The best steady-state configuration of a system among `rows` (the just-filled-table run is not one). */
function best(rows: readonly ThroughputSummary[], prefix: string): ThroughputSummary | undefined {
  return rows.filter((t) => t.key.startsWith(prefix) && !t.key.endsWith('-fresh') && !t.key.endsWith('-default')).sort((a, b) => b.jobsPerSec - a.jobsPerSec)[0];
}

export interface Target {
  target: string;
  measured: string;
  met: boolean;
}

const shapeOf = (t: ThroughputSummary) => t.config.replace(/, (pg driver|one connection)$/, '').replace(/, pg driver/, '');

export function targets(r: BenchResults): Target[] {
  const out: Target[] = [];
  const ratio = (a: number, b: number) => a / b;
  const vs = (label: string, mine: ThroughputSummary | undefined, theirs: ThroughputSummary | undefined, factor: number) => {
    if (!mine || !theirs) return;
    const x = ratio(mine.jobsPerSec, theirs.jobsPerSec);
    out.push({
      target: label,
      measured: `${fmt(x, 2)}× (${fmt(mine.jobsPerSec)} vs ${fmt(theirs.jobsPerSec)} jobs/s; ${shapeOf(mine)})`,
      met: x >= factor,
    });
  };
  const find = (rows: readonly ThroughputSummary[] | undefined, key: string) => rows?.find((t) => t.key === key);
  const t20 = r.throughput;
  const k20 = `${fmt(r.params.jobs)}`;
  const curve = r.curve ?? [];
  const k100 = `${fmt(r.params.curveJobs)}`;
  const curveSkiplock = curve.filter((t) => /^curve-\d+x\d+$/.test(t.key));
  const bestCurve = [...curveSkiplock].sort((a, b) => b.jobsPerSec - a.jobsPerSec)[0];
  for (const [backlog, rows, mineBest, mineDefault, pgBoss, graphile] of [
    [k20, t20, best(t20, 'skiplock-'), find(t20, 'skiplock-default'), best(t20, 'pg-boss'), best(t20, 'graphile')],
    [k100, curve, bestCurve, find(curve, 'curve-default'), find(curve, 'curve-pg-boss-2'), find(curve, 'curve-graphile-500')],
  ] as const) {
    if (!rows.length) continue;
    vs(`${backlog} jobs: skiplock, best shape ≥ 3× pg-boss (best tuning)`, mineBest, pgBoss, 3);
    vs(`${backlog} jobs: skiplock, default shape (one tick, concurrency 10) ≥ 3× pg-boss`, mineDefault, pgBoss, 3);
    vs(`${backlog} jobs: skiplock, best shape ≥ 1.5× graphile-worker (best tuning)`, mineBest, graphile, 1.5);
    vs(`${backlog} jobs: skiplock, default shape ≥ 1.5× graphile-worker`, mineDefault, graphile, 1.5);
  }
  vs(`${k20} jobs: one tick × 100 ≥ 0.8× the raw-SQL floor on one connection`, find(t20, 'skiplock-1'), find(t20, 'raw'), 0.8);
  vs(`${k20} jobs: 4 ticks × 100 ≥ 0.8× the raw-SQL floor on 8 connections`, find(t20, 'skiplock-4x100'), find(t20, 'raw-8'), 0.8);
  vs(`${k100} jobs: one tick × 100 ≥ 0.8× the raw-SQL floor on one connection`, find(curve, 'curve-1x100'), find(curve, 'curve-raw-1'), 0.8);
  vs(`${k100} jobs: 4 ticks × 100 ≥ 0.8× the raw-SQL floor on 4 connections`, find(curve, 'curve-4x100'), find(curve, 'curve-raw-4'), 0.8);
  vs(`${k100} jobs: best shape ≥ 0.8× the raw-SQL floor on 8 connections`, bestCurve, find(curve, 'curve-raw-8'), 0.8);
  vs(`${k100} jobs: 48 ticks × 25 (the serverless shape) ≥ 0.8× 4 ticks × 100`, find(curve, 'curve-48x25'), find(curve, 'curve-4x100'), 0.8);
  const oneTick = find(t20, 'skiplock-1');
  if (oneTick) out.push({
    target: '≤ 2 round trips per claimed batch (steady state)',
    measured: `${fmt(oneTick.roundTripsPerBatch, 2)} (mean batch ${fmt(oneTick.meanBatch, 1)} jobs)`,
    met: (oneTick.roundTripsPerBatch ?? Infinity) <= 2,
  });
  const history = r.claimLatency.filter((s) => s.queuedRows <= 25_000 && s.stats !== 'stale');
  const first = history[0];
  const last = history[history.length - 1];
  if (first && last) out.push({
    target: `claim latency within 1.5× from 0 to ${fmt(last.doneRows)} finished rows`,
    measured: `p50 ${fmt(first.p50Ms, 2)} → ${fmt(last.p50Ms, 2)} ms (${fmt(ratio(last.p50Ms, first.p50Ms), 2)}×)`,
    met: last.p50Ms <= 1.5 * first.p50Ms,
  });
  return out;
}

export function toMarkdown(r: BenchResults): string {
  const m = r.machine;
  const lines: string[] = [];
  lines.push(`# skiplock benchmarks`, '');
  lines.push(
    `${r.date.slice(0, 16).replace('T', ' ')} UTC · ${m.cpus} cores (${m.cpuModel}) · Node ${m.node} · PostgreSQL ${m.postgres} (embedded, fsync off) · ` +
      `load average ${m.loadAverage.join(' → ')} · ${r.seconds} s${r.quick ? ' · **quick run (BENCH_QUICK=1)**' : ''}`,
    '',
  );
  lines.push(
    `## Throughput: ${fmt(r.params.jobs)} no-op jobs, concurrency ${r.params.concurrency}`,
    '',
    `Median of ${r.params.rounds} rounds (interleaved); timed from the first handler call until the database shows every job finished. ` +
      'Jobs are enqueued first, then the database is VACUUM ANALYZEd (steady state) — except the just-filled-table run. ' +
      `Round trips: ${r.roundTripCounting}.`,
    '',
    '| system | configuration | jobs/s | rounds | load average (each round) | round trips / job | round trips / claimed batch | server statements / job |',
    '| --- | --- | ---: | --- | --- | ---: | ---: | ---: |',
  );
  const rows = [...r.throughput, ...(r.neonHttp.summary ? [r.neonHttp.summary] : [])];
  for (const t of rows) {
    lines.push(
      `| ${t.system} | ${t.config} | **${fmt(t.jobsPerSec)}** | ${t.rounds.map((x) => fmt(x)).join(' / ')} | ${loadsOf(t)} | ${fmt(t.roundTripsPerJob, 4)} | ` +
        `${t.roundTripsPerBatch === undefined ? '–' : fmt(t.roundTripsPerBatch, 2)} | ${t.serverStatements === undefined ? '–' : fmt(t.serverStatements / t.jobs, 4)} |`,
    );
  }
  lines.push(
    '',
    '### Cost per job: CPU time per 1,000 jobs',
    '',
    'Median over the rounds. CPU time is what background load on a shared machine distorts least (wall-clock throughput above suffers from it first). ' +
      'Worker: the process running the system (process.cpuUsage). PostgreSQL: every process of the server (/proc), autovacuum and WAL writer included. ' +
      'Statements: planning + execution time pg_stat_statements records for the database.',
    '',
    '| system | configuration | worker CPU ms | PostgreSQL CPU ms | total CPU ms | statement time ms |',
    '| --- | --- | ---: | ---: | ---: | ---: |',
  );
  for (const t of rows) {
    const total = t.clientCpuMsPerKJob !== undefined && t.serverCpuMsPerKJob !== undefined ? t.clientCpuMsPerKJob + t.serverCpuMsPerKJob : undefined;
    lines.push(`| ${t.system} | ${t.config} | ${fmt(t.clientCpuMsPerKJob, 1)} | ${fmt(t.serverCpuMsPerKJob, 1)} | **${fmt(total, 1)}** | ${fmt(t.serverStatementMsPerKJob, 1)} |`);
  }
  if (r.neonHttp.note) lines.push('', `Neon HTTP: ${r.neonHttp.note}.`);
  if (r.neonRoundTrips?.length) lines.push('', ...neonRoundTripMarkdown(r.neonRoundTrips));
  lines.push('', '![throughput](throughput.svg)', '');
  if (r.curve?.length) lines.push(...curveMarkdown(r), '');
  if (r.fsyncOn?.length) lines.push(...fsyncMarkdown(r), '');

  lines.push('## Targets', '', '| target | measured | met |', '| --- | --- | :---: |');
  for (const t of targets(r)) lines.push(`| ${t.target} | ${t.measured} | ${t.met ? 'yes' : '**no**'} |`);

  lines.push(
    '',
    `## Enqueue → start latency (${r.params.latency.rate} jobs/s, one at a time, ${r.params.latency.samples} jobs)`,
    '',
    '| system | how it learns of a new job | p50 ms | p99 ms | max ms |',
    '| --- | --- | ---: | ---: | ---: |',
  );
  for (const l of r.latency) lines.push(`| ${l.system} | ${l.config} | ${fmt(l.p50Ms, 1)} | ${fmt(l.p99Ms, 1)} | ${fmt(l.maxMs, 1)} |`);

  lines.push(
    '',
    '## Claim latency as the table grows',
    '',
    'The steady-state statement (write 100 results DONE + claim the next 100), one connection, 200 timed round trips after 10 warm-up ones; ' +
      'rows inserted with generate_series, then VACUUM ANALYZE — except the stale-statistics row: ANALYZE ran before the burst was inserted ' +
      '(autovacuum off for the table), as in the minute after a burst of enqueues before autovacuum analyzes it (10 timed round trips).',
    '',
    '| table | p50 ms | p99 ms | mean ms | server execution (EXPLAIN ANALYZE) ms |',
    '| --- | ---: | ---: | ---: | ---: |',
  );
  for (const s of r.claimLatency) lines.push(`| ${s.label}${s.queuedRows <= 25_000 ? ` + ${fmt(s.queuedRows)} QUEUED` : s.doneRows > 0 ? ` (on ${fmt(s.doneRows)} DONE rows)` : ''} | ${fmt(s.p50Ms, 2)} | ${fmt(s.p99Ms, 2)} | ${fmt(s.meanMs, 2)} | ${fmt(s.explainMs, 2)} |`);

  const mem = r.memory;
  if (mem) lines.push(
    '',
    `## Memory of one tick draining a ${fmt(mem.backlog)}-job backlog (concurrency ${mem.concurrency})`,
    '',
    'Sampled every 5 ms; the baseline is after a full GC with the backlog already in the table (inserted by SQL).',
    '',
    '| baseline RSS MB | peak RSS MB | baseline heap MB | peak heap MB | heap after the tick + full GC MB | drained in | jobs/s |',
    '| ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
    `| ${fmt(mem.baselineRssMb, 1)} | ${fmt(mem.peakRssMb, 1)} | ${fmt(mem.baselineHeapMb, 1)} | ${fmt(mem.peakHeapMb, 1)} | ${fmt(mem.afterGcHeapMb, 1)} | ${fmt(mem.ms / 1000, 1)} s | ${fmt(mem.jobsPerSec)} |`,
    '',
  );
  if (r.flow?.length) lines.push(...flowMarkdown(r), '');
  return lines.join('\n');
}

const loadsOf = (t: ThroughputSummary) => (t.loads?.length ? t.loads.map((l) => fmt(l, 1)).join(' / ') : '–');
const totalCpu = (t: ThroughputSummary) =>
  t.clientCpuMsPerKJob !== undefined && t.serverCpuMsPerKJob !== undefined ? t.clientCpuMsPerKJob + t.serverCpuMsPerKJob : undefined;
/** The claim statement's mean time per call (pg_stat_statements), in the median round. */
const claimMean = (t: ThroughputSummary) => claimStatementStats(t.statements ?? []).meanMs;

/** The concurrency curve (issue 17). */
function curveMarkdown(r: BenchResults): string[] {
  const curve = r.curve ?? [];
  const ref = curve.find((t) => t.key === 'curve-4x100');
  const lines = [
    `## Concurrency curve: ${fmt(r.params.curveJobs)}-job backlog`,
    '',
    `Median of ${r.params.rounds} rounds, interleaved among these configurations; measured as the throughput table. ` +
      'skiplock: that many ticks at once in one process (each with its own connection from the pool), each with that many slots: ' +
      'many small concurrent ticks is the shape serverless produces (a tick per enqueue with waitUntil, overlapping cron invocations). ' +
      'The raw-SQL floor: the claim statement in a bare loop on 1, 4 and 8 connections. The peers at their best tunings of the table above.',
    '',
    '| system | configuration | jobs/s | rounds | load average | vs 4 ticks × 100 | worker + PostgreSQL CPU ms / 1,000 jobs | statement ms / 1,000 jobs | claim statement ms / call | round trips / claimed batch | mean batch |',
    '| --- | --- | ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |',
  ];
  for (const t of curve) {
    lines.push(
      `| ${t.system} | ${t.config} | **${fmt(t.jobsPerSec)}** | ${t.rounds.map((x) => fmt(x)).join(' / ')} | ${loadsOf(t)} | ` +
        `${ref && t.key.match(/^curve-\d+x\d+$|^curve-default$/) ? `${fmt(t.jobsPerSec / ref.jobsPerSec, 2)}×` : '–'} | ` +
        `${fmt(t.clientCpuMsPerKJob, 1)} + ${fmt(t.serverCpuMsPerKJob, 1)} = ${fmt(totalCpu(t), 1)} | ${fmt(t.serverStatementMsPerKJob, 1)} | ${fmt(claimMean(t), 2)} | ` +
        `${t.roundTripsPerBatch === undefined ? '–' : fmt(t.roundTripsPerBatch, 2)} | ${t.meanBatch === undefined ? '–' : fmt(t.meanBatch, 1)} |`,
    );
  }
  lines.push('', '![concurrency curve](curve.svg)');
  return lines;
}

/** fsync on beside fsync off (the throughput table), configuration by configuration. */
function fsyncMarkdown(r: BenchResults): string[] {
  const lines = [
    `## fsync on and off: ${fmt(r.params.jobs)} no-op jobs`,
    '',
    'fsync off: the tables above (the test server: fsync, synchronous_commit and full_page_writes off). fsync on: a second server with all three on, ' +
      `as in production, the same configurations, median of ${r.params.rounds} rounds interleaved among them. Every commit waits for its WAL flush: ` +
      'one per claim statement for skiplock (one per batch), one per fetch and one per completion for the peers.',
    '',
    '| system | configuration | jobs/s fsync off | jobs/s fsync on | on ÷ off | CPU ms / 1,000 jobs off | CPU ms / 1,000 jobs on | load average (on) |',
    '| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |',
  ];
  for (const on of r.fsyncOn ?? []) {
    const off = r.throughput.find((t) => t.key === on.key);
    lines.push(
      `| ${on.system} | ${on.config} | ${off ? fmt(off.jobsPerSec) : '–'} | **${fmt(on.jobsPerSec)}** | ${off ? `${fmt(on.jobsPerSec / off.jobsPerSec, 2)}` : '–'} | ` +
        `${off ? fmt(totalCpu(off), 1) : '–'} | ${fmt(totalCpu(on), 1)} | ${loadsOf(on)} |`,
    );
  }
  return lines;
}

/** One tick over Neon's HTTP driver, the local proxy answering each statement a round trip later. */
function neonRoundTripMarkdown(results: readonly NeonRoundTripResult[]): string[] {
  const lines = [
    '### Over Neon\'s HTTP driver, a round trip away',
    '',
    'One tick over the Neon HTTP driver, through the local Neon proxy with every statement answered the given time later (an injected round-trip time). ' +
      'Each statement is one HTTP request; one tick has one in flight at a time, so jobs/s ≈ concurrency ÷ (statements per batch × ms per statement). ' +
      'The runs are short (60 claims each): CPU per job is not given, as fixed costs would swamp it. Median of the rounds.',
    '',
    '| round-trip time | concurrency | jobs | jobs/s | rounds | statements / job | ms per statement (wall) |',
    '| ---: | ---: | ---: | ---: | --- | ---: | ---: |',
  ];
  for (const { roundTripMs, concurrency, summary: t } of results) {
    lines.push(
      `| ${roundTripMs} ms | ${concurrency} | ${fmt(t.jobs)} | **${fmt(t.jobsPerSec)}** | ${t.rounds.map((x) => fmt(x)).join(' / ')} | ${fmt(t.roundTripsPerJob, 3)} | ` +
        `${fmt(1000 / (t.jobsPerSec * t.roundTripsPerJob), 1)} |`,
    );
  }
  return lines;
}

/** The flow-control section: each scenario beside the plain task of the same part of the run. */
function flowMarkdown(r: BenchResults): string[] {
  const flow = r.flow ?? [];
  const plain = flow.find((t) => t.key === 'flow-plain');
  const lines = [
    `## Flow control: ${fmt(r.params.jobs)} no-op jobs, one tick × concurrency ${r.params.concurrency}`,
    '',
    `Median of ${r.params.rounds} rounds (interleaved among these configurations only), measured as the throughput table above. ` +
      'Keys: job i has key i mod the key count. The rate limit (one key, 100,000 starts per second) never throttles this run: what it costs is its bookkeeping.',
    '',
    '| configuration | jobs/s | rounds | vs plain | round trips / job | round trips / claimed batch | mean batch | worker + PostgreSQL CPU ms / 1,000 jobs | statement time ms / 1,000 jobs |',
    '| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |',
  ];
  for (const t of flow) {
    const total = t.clientCpuMsPerKJob !== undefined && t.serverCpuMsPerKJob !== undefined ? t.clientCpuMsPerKJob + t.serverCpuMsPerKJob : undefined;
    lines.push(
      `| ${t.config} | **${fmt(t.jobsPerSec)}** | ${t.rounds.map((x) => fmt(x)).join(' / ')} | ${plain ? `${fmt((100 * t.jobsPerSec) / plain.jobsPerSec)}%` : '–'} | ` +
        `${fmt(t.roundTripsPerJob, 4)} | ${fmt(t.roundTripsPerBatch, 2)} | ${fmt(t.meanBatch, 1)} | ` +
        `${fmt(t.clientCpuMsPerKJob, 1)} + ${fmt(t.serverCpuMsPerKJob, 1)} = ${fmt(total, 1)} | ${fmt(t.serverStatementMsPerKJob, 1)} |`,
    );
  }
  return lines;
}

const COLORS: Record<string, string> = { raw: '#9e9e9e', skiplock: '#1565c0', 'pg-boss': '#ef6c00', graphile: '#2e7d32' };
// (curve keys: curve-raw-8 → raw-8, curve-default → skiplock)

function colorOf(key: string): string {
  return Object.entries(COLORS).find(([prefix]) => key.startsWith(prefix))?.[1] ?? '#555';
}

const escapeXml = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

/** Horizontal bars, one per configuration, jobs/s on the x axis. */
export function toSvg(r: BenchResults): string {
  const rows = [...r.throughput, ...(r.neonHttp.summary ? [r.neonHttp.summary] : [])];
  const labelWidth = 380;
  const barMax = 420;
  const rowHeight = 26;
  const top = 44;
  const width = labelWidth + barMax + 90;
  const height = top + rows.length * rowHeight + 30;
  const max = Math.max(...rows.map((t) => t.jobsPerSec));
  const label = (t: ThroughputSummary) => {
    const short = t.config
      .replace(/, (burstWhenBatchFull|LISTEN\/NOTIFY|completeJobBatchDelay 0|failJobBatchDelay 0|pg driver|neon-http driver|one connection)/g, '')
      .replace(' (no statistics yet)', '')
      .replace('completeAndClaim loop, ', '');
    return `${t.system}: ${short}`.slice(0, 60);
  };
  const parts = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="system-ui, sans-serif" font-size="12">`,
    `<rect width="100%" height="100%" fill="#fff"/>`,
    `<text x="10" y="20" font-size="14" font-weight="bold">No-op jobs per second (${r.params.jobs.toLocaleString('en')} jobs, concurrency ${r.params.concurrency}, median of ${r.params.rounds})</text>`,
    `<text x="10" y="36" fill="#666">${escapeXml(`${r.machine.cpus} cores, PostgreSQL ${r.machine.postgres}, ${r.date.slice(0, 10)}`)}</text>`,
  ];
  rows.forEach((t, i) => {
    const y = top + i * rowHeight;
    const w = Math.max(1, Math.round((t.jobsPerSec / max) * barMax));
    parts.push(
      `<text x="${labelWidth - 8}" y="${y + 16}" text-anchor="end">${escapeXml(label(t))}</text>`,
      `<rect x="${labelWidth}" y="${y + 4}" width="${w}" height="${rowHeight - 8}" fill="${colorOf(t.key)}"/>`,
      `<text x="${labelWidth + w + 6}" y="${y + 16}">${t.jobsPerSec.toLocaleString('en')}</text>`,
    );
  });
  parts.push(`</svg>`, '');
  return parts.join('\n');
}

/** The concurrency curve: skiplock's jobs/s by concurrent ticks (a line), the floors and peers as level lines. */
export function toCurveSvg(r: BenchResults): string {
  const curve = r.curve ?? [];
  const points = curve.filter((t) => /^curve-\d+x\d+$/.test(t.key)).map((t) => ({ ticks: Number(t.key.match(/^curve-(\d+)x/)![1]), t }));
  const levels = curve.filter((t) => !/^curve-\d+x\d+$/.test(t.key));
  const width = 760;
  const height = 400;
  const left = 70;
  const right = 250;
  const top = 50;
  const bottom = 50;
  const plotW = width - left - right;
  const plotH = height - top - bottom;
  const max = Math.max(1, ...curve.map((t) => t.jobsPerSec)) * 1.1;
  const x = (i: number) => left + (points.length <= 1 ? plotW / 2 : (i * plotW) / (points.length - 1));
  const y = (v: number) => top + plotH - (v / max) * plotH;
  const step = 10 ** Math.floor(Math.log10(max / 2));
  const ticksY: number[] = [];
  for (let v = 0; v <= max; v += max / step > 8 ? step * 2 : step) ticksY.push(v);
  const parts = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="system-ui, sans-serif" font-size="12">`,
    `<rect width="100%" height="100%" fill="#fff"/>`,
    `<text x="10" y="20" font-size="14" font-weight="bold">No-op jobs per second by concurrent ticks (${fmt(r.params.curveJobs)}-job backlog, median of ${r.params.rounds})</text>`,
    `<text x="10" y="36" fill="#666">${escapeXml(`${r.machine.cpus} cores, PostgreSQL ${r.machine.postgres}, fsync off, ${r.date.slice(0, 10)}; × 100 slots per tick up to 4 ticks, × 25 beyond`)}</text>`,
  ];
  for (const v of ticksY) {
    parts.push(
      `<line x1="${left}" x2="${left + plotW}" y1="${y(v)}" y2="${y(v)}" stroke="#eee"/>`,
      `<text x="${left - 6}" y="${y(v) + 4}" text-anchor="end" fill="#666">${fmt(v)}</text>`,
    );
  }
  // Labels of close levels are pushed apart (at least 14 px), top to bottom.
  let lastLabelY = -Infinity;
  for (const l of [...levels].sort((a, b) => b.jobsPerSec - a.jobsPerSec)) {
    const color = colorOf(l.key.replace(/^curve-/, '').replace(/^default$/, 'skiplock'));
    const raw = l.key.match(/^curve-raw-(\d+)$/);
    const name = l.key === 'curve-default' ? 'skiplock, 1 tick × 10 (default)'
      : raw ? `raw-SQL floor, ${raw[1]} connection${raw[1] === '1' ? '' : 's'}`
      : l.key.startsWith('curve-pg-boss') ? `pg-boss, ${l.config.match(/localConcurrency (\d+) × batchSize (\d+)/)?.slice(1).join(' × ') ?? ''}`
      : l.key.startsWith('curve-graphile') ? `graphile-worker, local queue ${l.config.match(/localQueue.size (\d+)/)?.[1] ?? ''}`
      : l.system;
    const labelY = Math.max(y(l.jobsPerSec) + 4, lastLabelY + 14);
    lastLabelY = labelY;
    parts.push(
      `<line x1="${left}" x2="${left + plotW}" y1="${y(l.jobsPerSec)}" y2="${y(l.jobsPerSec)}" stroke="${color}" stroke-dasharray="5 4"/>`,
      `<text x="${left + plotW + 6}" y="${labelY}" fill="${color}">${escapeXml(`${name.slice(0, 34)} ${fmt(l.jobsPerSec)}`)}</text>`,
    );
  }
  const path = points.map((p, i) => `${i === 0 ? 'M' : 'L'}${x(i)},${y(p.t.jobsPerSec)}`).join(' ');
  parts.push(`<path d="${path}" fill="none" stroke="${COLORS.skiplock}" stroke-width="2.5"/>`);
  points.forEach((p, i) => {
    parts.push(
      `<circle cx="${x(i)}" cy="${y(p.t.jobsPerSec)}" r="4" fill="${COLORS.skiplock}"/>`,
      `<text x="${x(i)}" y="${y(p.t.jobsPerSec) - 9}" text-anchor="middle" fill="${COLORS.skiplock}">${fmt(p.t.jobsPerSec)}</text>`,
      `<text x="${x(i)}" y="${top + plotH + 18}" text-anchor="middle">${p.ticks} × ${p.t.key.match(/x(\d+)$/)![1]}</text>`,
    );
  });
  parts.push(`<text x="${left + plotW / 2}" y="${height - 10}" text-anchor="middle" fill="#666">skiplock: concurrent ticks × slots per tick</text>`, `</svg>`, '');
  return parts.join('\n');
}

/**
 * A run with the flow-control part (`--flow`) is written as flow.{json,md}, beside the reference
 * run (latest.*, throughput.svg) that docs/benchmarks.md quotes, which it leaves as it was.
 */
export async function writeResults(r: BenchResults, dir = RESULTS_DIR): Promise<string[]> {
  await mkdir(dir, { recursive: true });
  const json = `${JSON.stringify({ ...r, targets: targets(r) }, null, 2)}\n`;
  const files: Record<string, string> = r.flow
    ? { 'flow.json': json, 'flow.md': toMarkdown(r) }
    : { 'latest.json': json, 'latest.md': toMarkdown(r), 'throughput.svg': toSvg(r), ...(r.curve?.length ? { 'curve.svg': toCurveSvg(r) } : {}) };
  for (const [name, text] of Object.entries(files)) await writeFile(`${dir}${name}`, text);
  return Object.keys(files).map((name) => `test/bench/results/${name}`);
}
