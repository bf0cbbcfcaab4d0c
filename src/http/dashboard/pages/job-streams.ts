/**
 * The job page's Streams section (docs/streams.md, docs/dashboard.md): each stream the job wrote
 * (src/store/stream-names.ts), its last chunks server-rendered from readStream — so the page shows
 * what is stored without JavaScript — strings as text, anything else as one line of JSON, every
 * value escaped by the html tag. While a stream can still grow, its box carries `data-stream-src`,
 * the job's stream route (`GET /v1/jobs/:id/stream`) after the last chunk shown, with a read
 * token minted for this job (the dashboard's session is a cookie; the route takes a bearer token
 * or a stream token): the layout's script opens an EventSource on it and appends each chunk as a
 * text node (never as HTML). The attribute's path starts with `/`, so under a mount prefix
 * (mount.ts) it gets the prefix like every `src="/…"`.
 */
import { html } from 'hono/html';
import type { JobDetail } from '../../../core/types.ts';
import { streamNames } from '../../../store/stream-names.ts';
import type { Html } from '../format.ts';
import type { DashboardDeps } from '../respond.ts';

/** At most this many streams on the page, and this many chunks of each (the last ones). */
export const DASHBOARD_STREAMS = { maxStreams: 10, lastChunks: 500, tokenTtlMs: 3_600_000 } as const;

interface ShownStream {
  name: string;
  chunks: number;
  /** Chunks before the ones shown. */
  skipped: number;
  text: string;
  /** The seq of the last chunk shown. */
  after: number;
  /** Where the live view reads on from; undefined when the stream is over and all of it is shown. */
  src: string | undefined;
  /** The stream is over and all of it is shown. */
  done: boolean;
}

export async function streamsSection(deps: DashboardDeps, job: JobDetail): Promise<Html | string> {
  const names = await deps.skiplock.sql.query(streamNames({ jobId: job.id, limit: DASHBOARD_STREAMS.maxStreams }));
  if (names.length === 0) return '';
  const shown = await Promise.all(names.map((row) => showStream(deps, job.id, String(row.stream), Number(row.chunks), Number(row.last_seq))));
  return html`<section class="card"><h2>Streams</h2>
${names.length === DASHBOARD_STREAMS.maxStreams ? html`<p class="muted">The first ${DASHBOARD_STREAMS.maxStreams} streams by name.</p>` : ''}
${shown.map((s) => streamBox(s))}
</section>`;
}

async function showStream(deps: DashboardDeps, jobId: string, name: string, chunks: number, lastSeq: number): Promise<ShownStream> {
  const from = Math.max(0, lastSeq - DASHBOARD_STREAMS.lastChunks);
  const page = await deps.skiplock.readStream(jobId, { name, after: from, limit: DASHBOARD_STREAMS.lastChunks });
  const text = page.chunks.map((c) => chunkText(c.data)).join('');
  const after = page.chunks.at(-1)?.seq ?? from;
  const src = page.done ? undefined : await liveSource(deps, jobId, name, after);
  return { name, chunks, skipped: from, text, after, src, done: page.done };
}

/** A string as it is; anything else as one line of JSON. */
export function chunkText(data: unknown): string {
  return typeof data === 'string' ? data : `${JSON.stringify(data)}\n`;
}

/**
 * The stream route after `after`, with a read token for this job; undefined when this skiplock
 * has no stream-token secret (createSkiplock's `streamTokens` or `callbacks`): the page then
 * shows what is stored, and a reload shows more.
 */
async function liveSource(deps: DashboardDeps, jobId: string, name: string, after: number): Promise<string | undefined> {
  let token: string;
  try {
    token = await deps.skiplock.streamToken(jobId, { ttlMs: DASHBOARD_STREAMS.tokenTtlMs });
  } catch (error) {
    if (error instanceof TypeError) return undefined;
    throw error;
  }
  return `/v1/jobs/${jobId}/stream?${new URLSearchParams({ name, after: String(after), token }).toString()}`;
}

function streamBox(s: ShownStream): Html {
  return html`<div class="stream" data-stream="${s.name}"${s.src ? html` data-stream-src="${s.src}" data-after="${s.after}"` : ''}>
  <h3><code>${s.name}</code> <span class="muted">${s.chunks.toLocaleString('en-US')} ${s.chunks === 1 ? 'chunk' : 'chunks'}${s.skipped > 0 ? `, ${s.skipped.toLocaleString('en-US')} earlier chunks not shown` : ''}</span> <span class="muted" data-stream-state>${s.src ? 'stored so far' : s.done ? '' : 'stored so far (reload for more)'}</span></h3>
  <pre class="code stream">${s.text}</pre>
</div>`;
}
