/** The page shell: head, top bar with navigation and logout, flash notice, and the one small script. */
import { html, raw } from 'hono/html';
import type { Html } from './format.ts';
import { STYLES } from './styles.ts';

export type Section = 'overview' | 'jobs' | 'dead' | 'schedules' | 'tasks' | 'events';

export interface Shell {
  title: string;
  /** The highlighted navigation entry; none on the login page. */
  section?: Section;
  /** The session's CSRF token, for the logout form; absent when logged out (no navigation then). */
  csrf?: string;
  /** The CSP nonce of this response's inline script. */
  nonce: string;
  notice?: Html | undefined;
}

const NAV: [Section, string, string][] = [
  ['overview', '/', 'Overview'],
  ['jobs', '/jobs', 'Jobs'],
  ['dead', '/dead', 'Dead letter'],
  ['schedules', '/schedules', 'Schedules'],
  ['tasks', '/tasks', 'Tasks'],
  ['events', '/events', 'Events'],
];

/**
 * Auto-refresh, off by default and remembered per browser: reloads every 10 s while the tab is
 * visible. Static text (no data in it); allowed by the CSP nonce.
 */
const AUTO_REFRESH = `(() => {
  const box = document.getElementById('auto-refresh');
  if (!box) return;
  box.parentElement.hidden = false;
  const key = 'skiplock.autoRefresh';
  box.checked = localStorage.getItem(key) === '1';
  let timer;
  const arm = () => {
    clearTimeout(timer);
    if (box.checked) timer = setTimeout(() => (document.visibilityState === 'visible' ? location.reload() : arm()), 10000);
  };
  box.addEventListener('change', () => { localStorage.setItem(key, box.checked ? '1' : '0'); arm(); });
  arm();
})();`;

/**
 * The job page's live streams (pages/job-streams.ts): an EventSource on each box's
 * `data-stream-src` (the stream route after the last chunk rendered, with a read token), each
 * chunk appended as a text node — a string as it is, anything else as a line of JSON — once (a
 * reconnect resumes with Last-Event-ID; a seq already shown is skipped), until `event: end`.
 */
const LIVE_STREAMS = `(() => {
  for (const box of document.querySelectorAll('[data-stream-src]')) {
    const out = box.querySelector('pre');
    const state = box.querySelector('[data-stream-state]');
    let last = Number(box.dataset.after);
    const source = new EventSource(box.dataset.streamSrc);
    state.textContent = 'live';
    source.onmessage = (event) => {
      const seq = Number(event.lastEventId);
      if (!(seq > last)) return;
      last = seq;
      const value = JSON.parse(event.data);
      out.append(typeof value === 'string' ? value : JSON.stringify(value) + '\\n');
      out.scrollTop = out.scrollHeight;
    };
    source.addEventListener('end', () => { source.close(); state.textContent = 'ended'; });
    source.onerror = () => { state.textContent = source.readyState === EventSource.CLOSED ? 'disconnected: reload the page' : 'reconnecting…'; };
  }
})();`;

/** Inline, so that browsers do not ask for /favicon.ico (a 404). */
const FAVICON = `data:image/svg+xml,${encodeURIComponent(
  "<svg xmlns='http://www.w3.org/2000/svg' viewBox='0 0 16 16'><rect width='16' height='16' rx='3' fill='#141a26'/><rect x='3' y='4' width='10' height='2' fill='#8aa4ff'/><rect x='3' y='7' width='7' height='2' fill='#2fa45a'/><rect x='3' y='10' width='4' height='2' fill='#d83a3a'/></svg>",
)}`;

// The only raw text of the dashboard: constants of this module, no data. (Inside <style> and
// <script> the browser does not decode entities, so escaping them would break them.)
const STATIC_STYLES = raw(STYLES);
const STATIC_SCRIPT = raw(`${AUTO_REFRESH}\n${LIVE_STREAMS}`);

export function layout(shell: Shell, body: Html): Html {
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="same-origin">
<title>${shell.title} · skiplock</title>
<link rel="icon" href="${FAVICON}">
<style>${STATIC_STYLES}</style>
</head>
<body>
${shell.csrf === undefined ? '' : topBar(shell.section, shell.csrf)}
<main>
${shell.notice ?? ''}
${body}
</main>
${shell.csrf === undefined ? '' : html`<script nonce="${shell.nonce}">${STATIC_SCRIPT}</script>`}
</body>
</html>`;
}

function topBar(section: Section | undefined, csrf: string): Html {
  return html`<header class="top"><div class="inner">
  <a class="brand" href="/">skip<span>lock</span></a>
  <nav class="main">
    ${NAV.map(([key, href, label]) => html`<a href="${href}"${key === section ? html` class="active" aria-current="page"` : ''}>${label}</a>`)}
  </nav>
  <div class="session">
    <label hidden><input type="checkbox" id="auto-refresh"> Auto-refresh</label>
    <form class="inline" method="post" action="/logout">
      <input type="hidden" name="csrf" value="${csrf}">
      <button type="submit">Log out</button>
    </form>
  </div>
</div></header>`;
}
