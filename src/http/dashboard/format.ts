/**
 * Small pieces every page uses: times, durations, status badges, JSON. Everything goes through
 * hono's `html` tag, which escapes each interpolated value. The only `raw` of the dashboard is
 * its static stylesheet and script (layout.ts).
 */
import { html } from 'hono/html';
import type { JobStatus } from '../../core/types.ts';

export type Html = ReturnType<typeof html>;

/** "850 ms", "42 s", "12 min", "3 h 5 min", "4 d 2 h". */
export function formatDuration(ms: number): string {
  const abs = Math.abs(ms);
  if (abs < 1000) return `${Math.round(abs)} ms`;
  const s = Math.floor(abs / 1000);
  if (s < 60) return `${s} s`;
  const min = Math.floor(s / 60);
  if (min < 60) return `${min} min`;
  const h = Math.floor(min / 60);
  if (h < 48) return min % 60 === 0 ? `${h} h` : `${h} h ${min % 60} min`;
  const d = Math.floor(h / 24);
  return h % 24 === 0 ? `${d} d` : `${d} d ${h % 24} h`;
}

/** "2026-11-01 12:03:04 UTC". */
export function formatTime(date: Date): string {
  return `${date.toISOString().slice(0, 19).replace('T', ' ')} UTC`;
}

/** A time relative to now ("3 min ago", "in 20 s"), with the exact UTC time on hover. */
export function relativeTime(date: Date | null, now: number): Html {
  if (!date) return html`<span class="muted">—</span>`;
  const delta = date.getTime() - now;
  const text = Math.abs(delta) < 1000 ? 'now' : delta < 0 ? `${formatDuration(delta)} ago` : `in ${formatDuration(delta)}`;
  return html`<time datetime="${date.toISOString()}" title="${formatTime(date)}">${text}</time>`;
}

export function statusBadge(status: JobStatus, extra?: string): Html {
  return html`<span class="badge status-${status.toLowerCase()}">${status}${extra ? html` · ${extra}` : ''}</span>`;
}

/** A badge in one of the alert tones. */
export function toneBadge(tone: 'ok' | 'warn' | 'bad' | 'muted' | 'waiting', text: string): Html {
  return html`<span class="badge tone-${tone}">${text}</span>`;
}

/** Indented JSON as text (escaped like any other text), in a scrollable block. */
export function jsonBlock(value: unknown): Html {
  const text = value === undefined ? 'undefined' : JSON.stringify(value, null, 2);
  return html`<pre class="code">${text}</pre>`;
}

/** A long single-line summary of a text, cut at `max` characters. */
export function truncate(text: string, max: number): string {
  const line = text.replace(/\s+/g, ' ').trim();
  return line.length > max ? `${line.slice(0, max - 1)}…` : line;
}

export function plural(n: number, one: string, many = `${one}s`): string {
  return `${n.toLocaleString('en-US')} ${n === 1 ? one : many}`;
}
