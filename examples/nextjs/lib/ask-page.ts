/**
 * The page at /ask: ask a question, watch the answer arrive chunk by chunk from the job's stream
 * (EventSource on skiplock's `GET /v1/jobs/:id/stream`), and reload at any moment: the page keeps
 * the job and the last chunk it showed in sessionStorage and resumes after it (`?after=`), so
 * nothing is shown twice or lost. While the page stays open, EventSource reconnects by itself and
 * resumes with `Last-Event-ID`. Plain HTML and a small script, no build step; text goes in with
 * `textContent`, never as HTML.
 */
export const ASK_PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Ask · skiplock streams</title>
<style>
  body { font: 16px/1.5 system-ui, sans-serif; max-width: 42rem; margin: 3rem auto; padding: 0 1rem; color: #1d2330; }
  form { display: flex; gap: .5rem; }
  input { flex: 1; font: inherit; padding: .4rem .6rem; }
  button { font: inherit; padding: .4rem 1rem; }
  #answer { white-space: pre-wrap; min-height: 6rem; padding: 1rem; margin-top: 1rem; background: #f4f6fa; border-radius: 6px; }
  #status { color: #5c6577; font-size: .9rem; }
</style>
</head>
<body>
<h1>Ask</h1>
<form id="ask">
  <input name="question" placeholder="How does resuming after a reload work?" required maxlength="500">
  <button type="submit">Ask</button>
</form>
<div id="answer" aria-live="polite"></div>
<p id="status"></p>
<script type="module">
const KEY = 'skiplock-example.ask';
const answer = document.getElementById('answer');
const status = document.getElementById('status');
let source;
// What this tab has shown: the job, the last chunk's seq, and the text so far (to redraw it on a reload).
let state = JSON.parse(sessionStorage.getItem(KEY) ?? 'null');

function save() { sessionStorage.setItem(KEY, JSON.stringify(state)); }
function say(text) { status.textContent = text; }

// Each chunk once, in order: seq must be the next one (a reconnect's replay of a chunk already shown is skipped).
function show(seq, data) {
  if (seq <= state.after) return;
  state.after = seq;
  state.text += typeof data === 'string' ? data : JSON.stringify(data);
  answer.textContent = state.text;
  save();
}

// Opens the job's stream after the last chunk shown: \`stream\` is a URL with a short-lived read token.
function listen(stream) {
  source?.close();
  const url = new URL(stream, location.href);
  url.searchParams.set('after', String(state.after));
  source = new EventSource(url);
  say(\`job \${state.id}: streaming…\`);
  source.onmessage = (event) => show(Number(event.lastEventId), JSON.parse(event.data));
  source.addEventListener('end', () => {
    source.close();
    state.done = true;
    save();
    say(\`job \${state.id}: done\`);
  });
  // A dropped connection: EventSource reconnects by itself with Last-Event-ID. A refused one (an
  // expired token) closes it: ask for a fresh token and go on after the last chunk.
  source.onerror = () => {
    if (source.readyState === EventSource.CLOSED) setTimeout(resume, 1000);
    else say(\`job \${state.id}: reconnecting…\`);
  };
}

async function resume() {
  const response = await fetch(\`ask/\${state.id}/stream\`, { method: 'POST' });
  if (!response.ok) return say(\`job \${state.id}: \${response.status}\`);
  listen((await response.json()).stream);
}

document.getElementById('ask').addEventListener('submit', async (event) => {
  event.preventDefault();
  const question = new FormData(event.target).get('question');
  const response = await fetch('ask', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ question }) });
  if (!response.ok) return say(\`could not ask: \${response.status}\`);
  const { id, stream } = await response.json();
  state = { id, after: 0, text: '', done: false };
  save();
  answer.textContent = '';
  listen(stream);
});

// A reload: redraw what was shown, and go on where it stopped.
if (state) {
  answer.textContent = state.text;
  if (state.done) say(\`job \${state.id}: done\`);
  else resume();
}
</script>
</body>
</html>
`;
