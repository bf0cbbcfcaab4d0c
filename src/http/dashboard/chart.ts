/**
 * The overview's chart: a stacked bar per minute (done, retrying, dead), as inline SVG rendered
 * on the server. No script and no library; each bar has a <title> for its numbers on hover.
 */
import { html } from 'hono/html';
import type { ActivityMinute } from '../../runtime/operations/index.ts';
import { plural, type Html } from './format.ts';

// About the card's width in pixels, so that the SVG's text renders near its nominal size.
const WIDTH = 1100;
const HEIGHT = 200;
const PAD = { left: 34, right: 8, top: 10, bottom: 22 } as const;
const SERIES = ['done', 'retrying', 'dead'] as const;

/** The smallest of 4, 10, 20, 50, 100, 200, … that is at least `max`. */
function axisMax(max: number): number {
  if (max <= 4) return 4;
  for (let step = 10; ; step *= 10) for (const m of [1, 2, 5]) if (m * step >= max) return m * step;
}

const hhmm = (date: Date) => date.toISOString().slice(11, 16);

export function activityChart(minutes: readonly ActivityMinute[]): Html {
  const totals = { done: 0, retrying: 0, dead: 0 };
  for (const m of minutes) for (const key of SERIES) totals[key] += m[key];
  const top = axisMax(Math.max(0, ...minutes.map((m) => m.done + m.retrying + m.dead)));
  const plotW = WIDTH - PAD.left - PAD.right;
  const plotH = HEIGHT - PAD.top - PAD.bottom;
  const slot = plotW / Math.max(1, minutes.length);
  const barW = Math.max(1, slot - 2);
  const y = (value: number) => PAD.top + plotH - (value / top) * plotH;
  const round = (n: number) => Math.round(n * 10) / 10;

  const bars = minutes.map((m, i) => {
    const x = round(PAD.left + i * slot + 1);
    let base = 0;
    const rects = SERIES.filter((key) => m[key] > 0).map((key) => {
      const rect = html`<rect class="bar-${key}" x="${x}" y="${round(y(base + m[key]))}" width="${round(barW)}" height="${round((m[key] / top) * plotH)}"></rect>`;
      base += m[key];
      return rect;
    });
    const label = `${hhmm(m.minute)} UTC: ${m.done} done, ${m.retrying} retrying, ${m.dead} dead`;
    // A full-height transparent target, so that hovering an empty minute shows its numbers too.
    return html`<g><title>${label}</title><rect class="bar-hover" x="${x}" y="${PAD.top}" width="${round(barW)}" height="${plotH}"></rect>${rects}</g>`;
  });

  const grid = [0, top / 2, top].map(
    (value) => html`<line class="grid" x1="${PAD.left}" x2="${WIDTH - PAD.right}" y1="${round(y(value))}" y2="${round(y(value))}"></line>
      <text class="axis" x="${PAD.left - 6}" y="${round(y(value) + 4)}" text-anchor="end">${value}</text>`,
  );
  const ticks = minutes
    .map((m, i) => ({ m, i }))
    .filter(({ i }) => i % 15 === 0 || i === minutes.length - 1)
    .map(({ m, i }) => {
      const last = i === minutes.length - 1;
      return html`<text class="axis" x="${round(PAD.left + i * slot + slot / 2)}" y="${HEIGHT - 6}" text-anchor="${last ? 'end' : 'middle'}">${last ? 'now' : hhmm(m.minute)}</text>`;
    });
  const empty = totals.done + totals.retrying + totals.dead === 0;
  const summary = `${plural(totals.done, 'job')} done, ${totals.retrying} retrying and ${totals.dead} dead over the last ${minutes.length} minutes`;

  return html`<figure class="chart">
  <svg viewBox="0 0 ${WIDTH} ${HEIGHT}" role="img" aria-label="${summary}">
    ${grid}${bars}${ticks}
    ${empty ? html`<text class="axis" x="${PAD.left + plotW / 2}" y="${PAD.top + plotH / 2}" text-anchor="middle">nothing finished or failed in this window</text>` : ''}
  </svg>
  <figcaption class="legend">
    <span><i class="swatch bar-done"></i>${totals.done} done</span>
    <span><i class="swatch bar-retrying"></i>${totals.retrying} retrying</span>
    <span><i class="swatch bar-dead"></i>${totals.dead} dead</span>
    <span class="muted">per minute (UTC), by each job's current state</span>
  </figcaption>
</figure>`;
}
