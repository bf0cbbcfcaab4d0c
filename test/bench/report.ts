/**
 * Writes a bench run as test/bench/results/latest.json (everything), latest.md (the tables and
 * the targets) and throughput.svg (a bar chart, hand-written SVG).
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import type { ClaimStepResult } from './claim-latency.ts';
import type { LatencyResult, ThroughputResult } from './harness.ts';
import type { MemoryResult } from './skiplock.ts';

export interface ThroughputSummary extends ThroughputResult {
  key: string;
  /** jobs/s of each round; `jobsPerSec` is their median, the other fields are the median round's. */
  rounds: number[];
}

export interface BenchResults {
  date: string;
  quick: boolean;
  machine: { cpus: number; cpuModel: string; memoryGb: number; node: string; postgres: string; loadAverage: number[] };
  params: { jobs: number; concurrency: number; rounds: number; latency: { rate: number; samples: number }; memoryBacklog: number };
  roundTripCounting: string;
  throughput: ThroughputSummary[];
  neonHttp: { summary?: ThroughputSummary; note?: string };
  latency: LatencyResult[];
  claimLatency: ClaimStepResult[];
  memory: MemoryResult | undefined;
  /** The flow-control scenarios (`npm run bench -- --flow`); absent when not run. */
  flow?: ThroughputSummary[];
  seconds: number;
}

export const RESULTS_DIR = fileURLToPath(new URL('./results/', import.meta.url));

const fmt = (n: number | undefined, digits = 0) =>
  n === undefined || Number.isNaN(n) ? '–' : n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });

/** The best steady-state configuration of a system (the just-filled-table run is not one). */
function best(results: BenchResults, prefix: string): ThroughputSummary {
  return results.throughput.filter((t) => t.key.startsWith(prefix) && !t.key.endsWith('-fresh')).sort((a, b) => b.jobsPerSec - a.jobsPerSec)[0]!;
}

export interface Target {
  target: string;
  measured: string;
  met: boolean;
}

export function targets(r: BenchResults): Target[] {
  const skiplock = best(r, 'skiplock-');
  const oneTick = r.throughput.find((t) => t.key === 'skiplock-1')!;
  const pgBoss = best(r, 'pg-boss');
  const graphile = best(r, 'graphile');
  const floor = r.throughput.find((t) => t.key === 'raw')!;
  const history = r.claimLatency.filter((s) => s.queuedRows <= 25_000 && s.stats !== 'stale');
  const first = history[0]!;
  const last = history[history.length - 1]!;
  const ratio = (a: number, b: number) => a / b;
  return [
    { target: 'skiplock ≥ 3× pg-boss throughput', measured: `${fmt(ratio(skiplock.jobsPerSec, pgBoss.jobsPerSec), 2)}×`, met: skiplock.jobsPerSec >= 3 * pgBoss.jobsPerSec },
    {
      target: 'skiplock ≥ 1.5× graphile-worker throughput',
      measured: `${fmt(ratio(skiplock.jobsPerSec, graphile.jobsPerSec), 2)}×`,
      met: skiplock.jobsPerSec >= 1.5 * graphile.jobsPerSec,
    },
    { target: 'skiplock (one tick) ≥ 80% of the raw-SQL floor', measured: `${fmt(100 * ratio(oneTick.jobsPerSec, floor.jobsPerSec))}%`, met: oneTick.jobsPerSec >= 0.8 * floor.jobsPerSec },
    {
      target: '≤ 2 round trips per claimed batch (steady state)',
      measured: `${fmt(oneTick.roundTripsPerBatch, 2)} (mean batch ${fmt(oneTick.meanBatch, 1)} jobs)`,
      met: (oneTick.roundTripsPerBatch ?? Infinity) <= 2,
    },
    {
      target: `claim latency within 1.5× from 0 to ${fmt(last.doneRows)} finished rows`,
      measured: `p50 ${fmt(first.p50Ms, 2)} → ${fmt(last.p50Ms, 2)} ms (${fmt(ratio(last.p50Ms, first.p50Ms), 2)}×)`,
      met: last.p50Ms <= 1.5 * first.p50Ms,
    },
  ];
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
    '| system | configuration (concurrency 100 each) | jobs/s | rounds | round trips / job | round trips / claimed batch | server statements / job |',
    '| --- | --- | ---: | --- | ---: | ---: | ---: |',
  );
  const rows = [...r.throughput, ...(r.neonHttp.summary ? [r.neonHttp.summary] : [])];
  for (const t of rows) {
    lines.push(
      `| ${t.system} | ${t.config} | **${fmt(t.jobsPerSec)}** | ${t.rounds.map((x) => fmt(x)).join(' / ')} | ${fmt(t.roundTripsPerJob, 4)} | ` +
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
  lines.push('', '![throughput](throughput.svg)', '');

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

/**
 * A run with the flow-control part (`--flow`) is written as flow.{json,md}, beside the reference
 * run (latest.*, throughput.svg) that docs/benchmarks.md quotes, which it leaves as it was.
 */
export async function writeResults(r: BenchResults, dir = RESULTS_DIR): Promise<string[]> {
  await mkdir(dir, { recursive: true });
  const json = `${JSON.stringify({ ...r, targets: targets(r) }, null, 2)}\n`;
  const files: Record<string, string> = r.flow
    ? { 'flow.json': json, 'flow.md': toMarkdown(r) }
    : { 'latest.json': json, 'latest.md': toMarkdown(r), 'throughput.svg': toSvg(r) };
  for (const [name, text] of Object.entries(files)) await writeFile(`${dir}${name}`, text);
  return Object.keys(files).map((name) => `test/bench/results/${name}`);
}
