/** The dashboard's whole stylesheet, inlined in every page (no CDN, no build, works offline). */
export const STYLES = `
:root {
  --bg: #f5f6f8; --surface: #fff; --border: #e2e5ea; --text: #1b2130; --muted: #687083;
  --accent: #2f5bd3; --bar: #141a26;
  --queued: #1d4ed8; --queued-bg: #dbe6fe; --running: #6d28d9; --running-bg: #ebe5fe;
  --done: #15803d; --done-bg: #d9f5e1; --dead: #c02626; --dead-bg: #fde2e2;
  --cancelled: #525b6b; --cancelled-bg: #e6e8ec; --warn: #a45a06; --warn-bg: #fdf0cc;
  --waiting: #0e7490; --waiting-bg: #d3f0f6;
  font: 14px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--text); background: var(--bg);
}
* { box-sizing: border-box; }
body { margin: 0; }
a { color: var(--accent); text-decoration: none; }
a:hover { text-decoration: underline; }
code, pre, .mono { font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; font-size: 12.5px; }
.muted { color: var(--muted); }
header.top { background: var(--bar); color: #e8ebf2; }
header.top .inner { max-width: 1180px; margin: 0 auto; padding: 0 20px; display: flex; align-items: center; gap: 28px; height: 52px; }
.brand { font-weight: 700; font-size: 16px; color: #fff; letter-spacing: .2px; }
.brand span { color: #8aa4ff; }
nav.main { display: flex; gap: 4px; flex: 1; }
nav.main a { color: #c3c9d6; padding: 6px 12px; border-radius: 6px; }
nav.main a:hover { background: #252d3d; color: #fff; text-decoration: none; }
nav.main a.active { background: #2b3447; color: #fff; }
.session { display: flex; align-items: center; gap: 14px; font-size: 13px; color: #aeb5c4; }
.session label { display: flex; align-items: center; gap: 6px; cursor: pointer; }
.session button { background: transparent; color: #c3c9d6; border: 1px solid #3a4357; padding: 4px 10px; }
.session button:hover { background: #252d3d; color: #fff; }
main { max-width: 1180px; margin: 0 auto; padding: 24px 20px 48px; }
h1 { font-size: 22px; margin: 0 0 4px; }
h2 { font-size: 15px; margin: 0 0 12px; }
.subtitle { color: var(--muted); margin: 0 0 20px; }
.card { background: var(--surface); border: 1px solid var(--border); border-radius: 10px; padding: 18px 20px; margin-bottom: 20px; }
.card.flush { padding: 0; overflow: hidden; }
.card.flush h2 { padding: 16px 20px 0; }
.stats { display: grid; grid-template-columns: repeat(7, 1fr); gap: 12px; margin-bottom: 20px; }
.stat { display: block; background: var(--surface); border: 1px solid var(--border); border-radius: 10px; padding: 14px 16px; color: inherit; border-top: 4px solid var(--border); }
.stat:hover { text-decoration: none; border-color: #c9ced8; }
.stat .label { color: var(--muted); font-size: 12px; text-transform: uppercase; letter-spacing: .5px; }
.stat .value { font-size: 28px; font-weight: 650; line-height: 1.2; margin-top: 4px; }
.stat .hint { font-size: 12px; color: var(--muted); }
.stat.queued { border-top-color: var(--queued); } .stat.running { border-top-color: var(--running); }
.stat.done { border-top-color: var(--done); } .stat.cancelled { border-top-color: var(--cancelled); }
.stat.dead { border-top-color: var(--dead); } .stat.waiting { border-top-color: var(--waiting); }
.stat.alert-bad { background: var(--dead-bg); border-color: #f3b4b4; border-top-color: var(--dead); }
.stat.alert-bad .value, .stat.alert-bad .hint { color: var(--dead); }
.stat.alert-warn { background: var(--warn-bg); border-color: #f1d48a; border-top-color: var(--warn); }
.stat.alert-warn .value, .stat.alert-warn .hint { color: var(--warn); }
.stat.lag.alert-ok { border-top-color: var(--done); }
.alerts { list-style: none; margin: 0 0 20px; padding: 0; display: grid; gap: 8px; }
.alerts li { border-radius: 8px; padding: 10px 14px; border: 1px solid; display: flex; gap: 10px; align-items: baseline; }
.alerts li.bad { background: var(--dead-bg); border-color: #f3b4b4; color: #7f1717; }
.alerts li.warn { background: var(--warn-bg); border-color: #f1d48a; color: #6b3b04; }
.alerts li.ok { background: var(--done-bg); border-color: #a9e2bb; color: #125f2f; }
.alerts strong { white-space: nowrap; }
.alerts a { color: inherit; text-decoration: underline; text-underline-offset: 2px; }
.overdue { color: var(--dead); font-weight: 600; }
.notice { border-radius: 8px; padding: 10px 14px; margin-bottom: 18px; border: 1px solid #a9e2bb; background: var(--done-bg); color: #125f2f; }
.notice.error { border-color: #f3b4b4; background: var(--dead-bg); color: #7f1717; }
.grid2 { display: grid; grid-template-columns: 1fr 1fr; gap: 20px; }
table { width: 100%; border-collapse: collapse; }
th, td { text-align: left; padding: 9px 12px; border-bottom: 1px solid var(--border); vertical-align: baseline; }
td.mono { font-size: 13px; }
th { font-size: 12px; text-transform: uppercase; letter-spacing: .4px; color: var(--muted); font-weight: 600; background: #fafbfc; }
tbody tr:last-child td { border-bottom: none; }
tbody tr:hover { background: #fafbfd; }
tr.row-bad { background: #fff6f6; } tr.row-bad:hover { background: #fdeeee; }
tr.row-bad td:first-child { box-shadow: inset 3px 0 0 var(--dead); }
tr.row-warn { background: #fffaef; } tr.row-warn:hover { background: #fdf4de; }
tr.row-warn td:first-child { box-shadow: inset 3px 0 0 var(--warn); }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
td.zero { color: #b8bdc8; }
td.error { color: #7f1717; max-width: 360px; }
.badge { display: inline-block; padding: 1px 8px; border-radius: 999px; font-size: 11.5px; font-weight: 650; letter-spacing: .3px; white-space: nowrap; }
.status-queued { color: var(--queued); background: var(--queued-bg); }
.status-running { color: var(--running); background: var(--running-bg); }
.status-waiting, .tone-waiting { color: var(--waiting); background: var(--waiting-bg); }
.status-done { color: var(--done); background: var(--done-bg); }
.status-dead { color: #fff; background: var(--dead); }
.status-dead a { color: #fff; }
.status-cancelled { color: var(--cancelled); background: var(--cancelled-bg); }
.tone-ok { color: var(--done); background: var(--done-bg); }
.tone-warn { color: var(--warn); background: var(--warn-bg); }
.tone-bad { color: #fff; background: var(--dead); }
.tone-muted { color: var(--cancelled); background: var(--cancelled-bg); }
.tag { display: inline-block; font-size: 11px; color: var(--muted); border: 1px solid var(--border); border-radius: 4px; padding: 0 5px; margin-left: 6px; }
form.inline { display: inline; margin: 0; }
button, .button { font: inherit; font-size: 13px; font-weight: 600; border-radius: 6px; border: 1px solid var(--border); background: var(--surface); color: var(--text); padding: 5px 12px; cursor: pointer; display: inline-block; }
button:hover, .button:hover { background: #f0f2f5; text-decoration: none; }
button.primary { background: var(--accent); border-color: var(--accent); color: #fff; }
button.primary:hover { background: #264bb2; }
button.danger { color: var(--dead); border-color: #efb2b2; }
button.danger:hover { background: var(--dead-bg); }
.filters { display: flex; gap: 12px; align-items: end; flex-wrap: wrap; padding: 14px 20px; border-bottom: 1px solid var(--border); background: #fafbfc; }
.filters label { display: grid; gap: 3px; font-size: 12px; color: var(--muted); font-weight: 600; }
select, input[type=text], input[type=password] { font: inherit; font-size: 13.5px; padding: 5px 9px; border: 1px solid #cfd4dc; border-radius: 6px; background: #fff; color: var(--text); min-width: 170px; }
.chips { display: flex; gap: 6px; flex-wrap: wrap; padding: 12px 20px; border-bottom: 1px solid var(--border); }
.chips a { border: 1px solid var(--border); border-radius: 999px; padding: 2px 10px; font-size: 12.5px; color: var(--text); }
.chips a.active { background: var(--bar); color: #fff; border-color: var(--bar); }
.pager { display: flex; justify-content: space-between; align-items: center; padding: 12px 20px; border-top: 1px solid var(--border); color: var(--muted); font-size: 13px; }
.empty { padding: 28px 20px; text-align: center; color: var(--muted); }
dl.facts { display: grid; grid-template-columns: 150px 1fr; gap: 8px 16px; margin: 0; }
dl.facts dt { color: var(--muted); }
dl.facts dd { margin: 0; overflow-wrap: anywhere; }
pre.code { background: #f6f7f9; border: 1px solid var(--border); border-radius: 8px; padding: 12px 14px; margin: 0; overflow: auto; max-height: 420px; white-space: pre-wrap; overflow-wrap: anywhere; }
ol.timeline { list-style: none; margin: 0; padding: 0; }
ol.timeline li.attempt { padding: 10px 0 10px 14px; border-left: 3px solid var(--border); margin-left: 4px; }
ol.timeline li.attempt + li.attempt { margin-top: 6px; }
ol.timeline .attempt-head { display: flex; gap: 8px; align-items: baseline; flex-wrap: wrap; }
ol.timeline .attempt-fact { margin-top: 6px; font-size: 13px; overflow-wrap: anywhere; }
ol.timeline pre.code { margin-top: 8px; max-height: 160px; }
li.tone-line-ok { border-left-color: var(--done); } li.tone-line-warn { border-left-color: var(--warn); }
li.tone-line-bad { border-left-color: var(--dead); } li.tone-line-muted { border-left-color: var(--cancelled); }
li.tone-line-running { border-left-color: var(--running); border-left-style: dashed; }
table.steps td { vertical-align: top; }
table.steps td.mono { min-width: 150px; overflow-wrap: anywhere; }
table.steps code.error { color: #7f1717; }
.card.flush .note { padding: 0 20px; }
table.steps details summary { cursor: pointer; overflow-wrap: anywhere; }
table.steps pre.code { margin-top: 6px; max-height: 240px; }
.stream + .stream { margin-top: 16px; }
.stream h3 { font-size: 13px; font-weight: 600; margin: 0 0 6px; }
pre.code.error { background: #fff6f6; border-color: #f3c4c4; color: #7f1717; }
.title-row { display: flex; align-items: center; gap: 12px; flex-wrap: wrap; margin-bottom: 4px; }
.title-row h1 { margin: 0; }
.title-row .actions { margin-left: auto; display: flex; gap: 8px; }
.chart svg { width: 100%; height: auto; display: block; }
.chart { margin: 0; }
.chart .grid { stroke: #e7e9ee; stroke-width: 1; }
.chart .axis { fill: var(--muted); font-size: 11px; }
.chart .bar-hover { fill: transparent; }
.chart g:hover .bar-hover { fill: #eef1f6; }
.bar-done { fill: #2fa45a; } .bar-retrying { fill: #e0a021; } .bar-dead { fill: #d83a3a; }
.legend { display: flex; gap: 18px; flex-wrap: wrap; font-size: 13px; margin-top: 8px; align-items: center; }
.swatch { display: inline-block; width: 10px; height: 10px; border-radius: 2px; margin-right: 6px; }
.swatch.bar-done { background: #2fa45a; } .swatch.bar-retrying { background: #e0a021; } .swatch.bar-dead { background: #d83a3a; }
.legend .muted { margin-left: auto; font-size: 12px; }
.login { max-width: 380px; margin: 12vh auto 0; }
.login .card { padding: 28px; }
.login h1 span { color: var(--accent); }
.login label { display: grid; gap: 6px; font-weight: 600; font-size: 13px; margin: 18px 0; }
.login input { width: 100%; padding: 8px 10px; }
.login button { width: 100%; padding: 8px; }
@media (max-width: 900px) { .stats { grid-template-columns: repeat(4, 1fr); } .grid2 { grid-template-columns: 1fr; } }
`;
