/** The dashboard through app.request: login, the session cookie, CSRF, the actions, escaping, the pages. */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { createApp } from '../../src/http/app.ts';
import { SESSION_TTL_SECONDS } from '../../src/http/dashboard/session.ts';
import { createSkiplock } from '../../src/runtime/skiplock.ts';
import { createPgDriver } from '../../src/store/drivers/pg.ts';
import { statement } from '../../src/store/sql.ts';
import { exampleTasks } from '../../src/tasks/examples.ts';
import { API_TOKEN, createTestApp, type TestApp } from './helpers.ts';
import { claimAsRunning, csrfOf, getPage, logIn, ORIGIN, postForm } from './dashboard-support.ts';

let t: TestApp;
let cookie: string;
beforeAll(async () => {
  t = await createTestApp();
  cookie = await logIn(t);
});
afterAll(() => t.close());

async function deadJob(): Promise<string> {
  const job = await t.skiplock.enqueue({ task: 'poison', payload: {} });
  await t.skiplock.tick({ untilIdle: true, budgetMs: 20_000, pollIntervalMs: 10 });
  expect((await t.skiplock.getJob(job.id))?.status).toBe('DEAD');
  return job.id;
}

async function statusOf(id: string) {
  return (await t.skiplock.getJob(id))?.status;
}

/** The session value for an expiry, signed with the token as the app does (to forge an expired one). */
async function signedSession(expires: number, secret = API_TOKEN): Promise<string> {
  const key = await crypto.subtle.importKey('raw', new TextEncoder().encode(secret), { name: 'HMAC', hash: 'SHA-256' }, false, ['sign']);
  const mac = new Uint8Array(await crypto.subtle.sign('HMAC', key, new TextEncoder().encode(`session:${expires}`)));
  return `skiplock_session=${expires}.${Buffer.from(mac).toString('base64url')}`;
}

describe('login', () => {
  test('pages redirect to the login form when logged out, remembering where to go back', async () => {
    for (const [path, next] of [['/', '/'], ['/jobs?status=DEAD&task=poison', '/jobs?status=DEAD&task=poison'], ['/dead', '/dead'], ['/schedules', '/schedules'], ['/jobs/1', '/jobs/1']]) {
      const res = await getPage(t, path!);
      expect(res.status, path).toBe(303);
      expect(res.headers.get('location')).toBe(`/login?next=${encodeURIComponent(next!)}`);
    }
    const form = await getPage(t, '/login?next=%2Fdead');
    expect(form.status).toBe(200);
    expect(form.headers.get('content-type')).toMatch(/^text\/html/);
    const html = await form.text();
    expect(html).toContain('<form method="post" action="/login">');
    expect(html).toContain('name="next" value="/dead"');
    expect(html).toContain('type="password" name="token"');
  });

  test('the right token sets an HttpOnly, SameSite=Strict session cookie that holds no token, and redirects', async () => {
    const res = await postForm(t, '/login', { token: API_TOKEN, next: '/dead' });
    expect(res.status).toBe(303);
    expect(res.headers.get('location')).toBe('/dead');
    const setCookie = res.headers.get('set-cookie')!;
    expect(setCookie).toMatch(/^skiplock_session=\d+\.[A-Za-z0-9_-]{43}; Max-Age=43200; Path=\/; HttpOnly; SameSite=Strict$/);
    expect(setCookie).not.toContain(API_TOKEN);
    expect(SESSION_TTL_SECONDS).toBe(43_200);
    // Over https (or behind a proxy that says so) the cookie is Secure.
    const https = await t.app.request(new Request('https://skiplock.test/login', {
      method: 'POST',
      headers: { origin: 'https://skiplock.test', 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ token: API_TOKEN }).toString(),
    }));
    expect(https.headers.get('set-cookie')).toMatch(/; Secure/);
    const proxied = await postForm(t, '/login', { token: API_TOKEN }, { headers: { 'x-forwarded-proto': 'https' } });
    expect(proxied.headers.get('set-cookie')).toMatch(/; Secure/);
    // The session opens the pages.
    const page = await getPage(t, '/', cookie);
    expect(page.status).toBe(200);
    expect(await page.text()).toContain('<h1>Overview</h1>');
  });

  test.each([
    ['a wrong token', 'wrong-token'],
    ['the token one character short', API_TOKEN.slice(0, -1)],
    ['the token with a suffix', `${API_TOKEN}x`],
    ['an empty token', ''],
  ])('%s: 401, the form again with an error, no cookie', async (_name, token) => {
    const res = await postForm(t, '/login', { token, next: '/jobs' });
    expect(res.status).toBe(401);
    expect(res.headers.get('set-cookie')).toBeNull();
    const html = await res.text();
    expect(html).toContain('That is not the API token.');
    expect(html).toContain('name="next" value="/jobs"');
  });

  test('a login from another site, or with no Origin or Referer, is refused', async () => {
    for (const options of [{ origin: 'https://evil.example' }, { origin: 'null' }, { origin: null }, { origin: null, referer: 'https://evil.example/skiplock.test' }]) {
      const res = await postForm(t, '/login', { token: API_TOKEN }, options);
      expect(res.status, JSON.stringify(options)).toBe(403);
      expect(res.headers.get('set-cookie')).toBeNull();
    }
    // A same-site Referer is enough when a browser leaves Origin out.
    const referer = await postForm(t, '/login', { token: API_TOKEN }, { origin: null, referer: `${ORIGIN}/login` });
    expect(referer.status).toBe(303);
  });

  test('next must stay on this site', async () => {
    for (const next of ['//evil.example/', '/\\evil.example', 'https://evil.example/', 'javascript:alert(1)', '/ok path']) {
      const res = await postForm(t, '/login', { token: API_TOKEN, next });
      expect(res.headers.get('location'), next).toBe('/');
    }
    const loggedIn = await getPage(t, `/login?next=${encodeURIComponent('//evil.example')}`, cookie);
    expect(loggedIn.status).toBe(303);
    expect(loggedIn.headers.get('location')).toBe('/');
  });

  test('forged, tampered, expired and other-token cookies are not sessions', async () => {
    const now = Math.floor(Date.now() / 1000);
    const value = cookie.split('=')[1]!;
    const tampered = `skiplock_session=${Number(value.split('.')[0]) + 1}.${value.split('.')[1]}`;
    for (const bad of [
      'skiplock_session=',
      `skiplock_session=${API_TOKEN}`,
      tampered,
      await signedSession(now - 1),
      await signedSession(now + 3600, 'another-token'),
    ]) {
      const res = await getPage(t, '/', bad);
      expect(res.status, bad).toBe(303);
      expect(res.headers.get('location')).toBe('/login?next=%2F');
    }
    expect((await getPage(t, '/', await signedSession(now + 60))).status).toBe(200);
  });

  test('the session opens no API route: those still need the bearer token', async () => {
    const res = await t.call('GET', '/v1/stats', { token: null, headers: { cookie } });
    expect(res.status).toBe(401);
  });

  test('logout clears the cookie (with the CSRF token)', async () => {
    const session = await logIn(t);
    const refused = await postForm(t, '/logout', {}, { cookie: session });
    expect(refused.status).toBe(403);
    const res = await postForm(t, '/logout', { csrf: await csrfOf(t, session) }, { cookie: session });
    expect(res.status).toBe(303);
    expect(res.headers.get('location')).toBe('/login');
    expect(res.headers.get('set-cookie')).toMatch(/^skiplock_session=; Max-Age=0; Path=\//);
  });
});

describe('actions', () => {
  test('Retry on a DEAD job: 303 back to the job, which is QUEUED now, with a notice', async () => {
    const id = await deadJob();
    const csrf = await csrfOf(t, cookie, `/jobs/${id}`);
    const res = await postForm(t, `/jobs/${id}/retry`, { csrf, return_to: `/jobs/${id}` }, { cookie });
    expect(res.status).toBe(303);
    expect(res.headers.get('location')).toBe(`/jobs/${id}?notice=retried&job=${id}`);
    expect(await statusOf(id)).toBe('QUEUED');
    const page = await (await getPage(t, res.headers.get('location')!, cookie)).text();
    expect(page).toContain('<span class="badge status-queued">QUEUED</span>');
    expect(page).toMatch(/was retried: it is QUEUED again/);
    // Now the job page offers Cancel instead of Retry.
    expect(page).toContain(`action="/jobs/${id}/cancel"`);
    expect(page).not.toContain(`action="/jobs/${id}/retry"`);
  });

  test('Retry from the dead letter goes back to it; a job that is not DEAD any more gets a conflict notice', async () => {
    const id = await deadJob();
    const deadPage = await (await getPage(t, '/dead', cookie)).text();
    expect(deadPage).toContain(`action="/jobs/${id}/retry"`);
    expect(deadPage).not.toContain(`action="/jobs/${id}/cancel"`);
    const csrf = await csrfOf(t, cookie, '/dead');
    const first = await postForm(t, `/jobs/${id}/retry`, { csrf, return_to: '/dead' }, { cookie });
    expect(first.headers.get('location')).toBe(`/dead?notice=retried&job=${id}`);
    const again = await postForm(t, `/jobs/${id}/retry`, { csrf, return_to: '/dead' }, { cookie });
    expect(again.status).toBe(303);
    expect(again.headers.get('location')).toBe(`/dead?notice=conflict&job=${id}`);
    expect(await (await getPage(t, again.headers.get('location')!, cookie)).text()).toContain('was not changed');
    expect(await statusOf(id)).toBe('QUEUED');
  });

  test('Retry all on the dead letter: one task\'s dead jobs back to the queue, with a count notice; then every task\'s', async () => {
    const poisoned = [await deadJob(), await deadJob()];
    // Earlier tests' retried poison jobs died again in those ticks too: count what is there.
    const n = (await t.skiplock.stats()).byTask.poison!.DEAD;
    expect(n).toBeGreaterThanOrEqual(2);
    const page = await (await getPage(t, '/dead?task=poison', cookie)).text();
    expect(page).toContain('action="/dead/retry"');
    expect(page).toContain(`<button type="submit" class="primary">Retry all ${n} of poison</button>`);
    const csrf = await csrfOf(t, cookie, '/dead');
    const res = await postForm(t, '/dead/retry', { csrf, task: 'poison' }, { cookie });
    expect(res.status).toBe(303);
    expect(res.headers.get('location')).toBe(`/dead?task=poison&notice=retried-dead&count=${n}`);
    for (const id of poisoned) expect(await statusOf(id)).toBe('QUEUED');
    const after = await (await getPage(t, res.headers.get('location')!, cookie)).text();
    expect(after).toContain(`${n} dead jobs were retried: QUEUED again`);
    expect(after).not.toContain('action="/dead/retry"'); // nothing of poison left to retry
    // Without a task: every task's (none left); a forged count in the URL shows nothing.
    const again = await postForm(t, '/dead/retry', { csrf }, { cookie });
    expect(again.headers.get('location')).toMatch(/^\/dead\?notice=retried-dead&count=\d+$/);
    expect((await t.skiplock.stats()).counts.DEAD).toBe(0);
    expect(await (await getPage(t, '/dead?notice=retried-dead&count=<b>', cookie)).text()).not.toContain('were retried');
    // Like every action: a forged CSRF token changes nothing.
    const left = await deadJob();
    expect((await postForm(t, '/dead/retry', { csrf: 'forged' }, { cookie })).status).toBe(403);
    expect(await statusOf(left)).toBe('DEAD');
  });

  test('Cancel: QUEUED → CANCELLED; RUNNING is asked to stop; DEAD cannot be cancelled (the state machine)', async () => {
    const csrf = await csrfOf(t, cookie);
    const queued = await t.skiplock.enqueue({ task: 'echo', payload: { message: 'later' }, delayMs: 3_600_000 });
    const res = await postForm(t, `/jobs/${queued.id}/cancel`, { csrf }, { cookie });
    expect(res.headers.get('location')).toBe(`/jobs/${queued.id}?notice=cancelled&job=${queued.id}`);
    expect(await statusOf(queued.id)).toBe('CANCELLED');

    const sleeping = await t.skiplock.enqueue({ task: 'sleep', payload: { ms: 1000 } });
    expect(await claimAsRunning(t.skiplock, 'sleep')).toEqual([sleeping.id]);
    const running = await (await getPage(t, `/jobs/${sleeping.id}`, cookie)).text();
    expect(running).toContain('Request cancel');
    expect(running).toContain('demo-worker-1');
    const requested = await postForm(t, `/jobs/${sleeping.id}/cancel`, { csrf, return_to: '/jobs' }, { cookie });
    expect(requested.headers.get('location')).toBe(`/jobs?notice=cancel-requested&job=${sleeping.id}`);
    expect(await t.skiplock.getJob(sleeping.id)).toMatchObject({ status: 'RUNNING', cancelRequested: true });

    const dead = await deadJob();
    const refused = await postForm(t, `/jobs/${dead}/cancel`, { csrf }, { cookie });
    expect(refused.headers.get('location')).toBe(`/jobs/${dead}?notice=conflict&job=${dead}`);
    expect(await statusOf(dead)).toBe('DEAD');

    const missing = await postForm(t, '/jobs/987654321/retry', { csrf }, { cookie });
    expect(missing.headers.get('location')).toBe('/jobs/987654321?notice=not-found&job=987654321');
  });

  test('return_to cannot leave the site', async () => {
    const id = await deadJob();
    const csrf = await csrfOf(t, cookie);
    const res = await postForm(t, `/jobs/${id}/retry`, { csrf, return_to: 'https://evil.example/x' }, { cookie });
    expect(res.headers.get('location')).toBe(`/jobs/${id}?notice=retried&job=${id}`);
  });

  test('CSRF: without the token, with a wrong one, from another site, or with no Origin, nothing is done (403)', async () => {
    const id = await deadJob();
    const csrf = await csrfOf(t, cookie);
    const otherSession = await signedSession(Math.floor(Date.now() / 1000) + 999);
    const otherCsrf = await csrfOf(t, otherSession);
    expect(otherCsrf).not.toBe(csrf);
    const attempts: [string, Record<string, string>, Parameters<typeof postForm>[3]][] = [
      ['no token', {}, { cookie }],
      ['an empty token', { csrf: '' }, { cookie }],
      ['a wrong token', { csrf: 'x'.repeat(43) }, { cookie }],
      ["another session's token", { csrf: otherCsrf }, { cookie }],
      ['a cross-site Origin', { csrf }, { cookie, origin: 'https://evil.example' }],
      ['Origin null', { csrf }, { cookie, origin: 'null' }],
      ['no Origin and a cross-site Referer', { csrf }, { cookie, origin: null, referer: 'https://evil.example/' }],
      ['no Origin and no Referer', { csrf }, { cookie, origin: null }],
    ];
    for (const [name, fields, options] of attempts) {
      const res = await postForm(t, `/jobs/${id}/retry`, fields, options);
      expect(res.status, name).toBe(403);
      expect(await res.text()).toContain('nothing was done');
      expect(await statusOf(id), name).toBe('DEAD');
    }
    // Logged out: to the login form, and nothing is done either.
    const loggedOut = await postForm(t, `/jobs/${id}/retry`, { csrf });
    expect(loggedOut.status).toBe(303);
    expect(loggedOut.headers.get('location')).toBe('/login');
    expect(await statusOf(id)).toBe('DEAD');
    // The right token with a same-site Referer (no Origin) goes through.
    expect((await postForm(t, `/jobs/${id}/retry`, { csrf }, { cookie, origin: null, referer: `${ORIGIN}/dead` })).status).toBe(303);
    expect(await statusOf(id)).toBe('QUEUED');
  });

  test('behind a proxy the X-Forwarded-Host counts as this site', async () => {
    const id = await deadJob();
    const csrf = await csrfOf(t, cookie);
    const res = await t.app.request(new Request(`${ORIGIN}/jobs/${id}/retry`, {
      method: 'POST',
      headers: { cookie, origin: 'https://queue.example.com', 'x-forwarded-host': 'queue.example.com', 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ csrf }).toString(),
    }));
    expect(res.status).toBe(303);
    expect(await statusOf(id)).toBe('QUEUED');
  });
});

describe('pages', () => {
  test('every page answers 200 HTML with the security headers and exactly one script, ours', async () => {
    const id = await deadJob();
    for (const path of ['/', '/jobs', '/jobs?status=DEAD&task=poison', `/jobs/${id}`, '/dead', '/dead?task=poison', '/schedules', '/tasks']) {
      const res = await getPage(t, path, cookie);
      expect(res.status, path).toBe(200);
      const csp = res.headers.get('content-security-policy')!;
      expect(csp).toContain("default-src 'none'");
      expect(csp).toContain("frame-ancestors 'none'");
      const nonce = /script-src 'nonce-([^']+)'/.exec(csp)?.[1];
      expect(nonce).toBeDefined();
      expect(res.headers.get('x-frame-options')).toBe('DENY');
      expect(res.headers.get('cache-control')).toBe('no-store');
      const html = await res.text();
      expect(html.match(/<script/g)).toHaveLength(1);
      expect(html).toContain(`<script nonce="${nonce}">`);
      expect(html).not.toMatch(/https?:\/\/(?!www\.w3\.org)/); // Nothing from elsewhere (offline).
    }
  });

  test('the job page answers why it failed, how far it got and where its trace is: the attempts as a timeline', async () => {
    const traceparent = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
    const job = await t.skiplock.enqueue({ task: 'flaky', payload: { failTimes: 1 }, traceparent });
    await t.skiplock.tick({ untilIdle: true, budgetMs: 20_000, pollIntervalMs: 10 });
    // Due at once instead of after its backoff, and a progress as a handler would leave it.
    await t.db.sql.query(statement(`UPDATE skiplock.job SET run_at = now() WHERE id = $1`, [job.id]));
    await t.skiplock.tick({ untilIdle: true, budgetMs: 20_000, pollIntervalMs: 10 });
    await t.db.sql.query(statement(`UPDATE skiplock.job SET progress = '{"done": 7, "of": "<b>10</b>"}' WHERE id = $1`, [job.id]));
    const page = await (await getPage(t, `/jobs/${job.id}`, cookie)).text();
    const timeline = page.slice(page.indexOf('<h2>Attempts</h2>'));
    expect(timeline).toMatch(/Attempt 1<\/strong>.*failed, retried/s);
    expect(timeline).toMatch(/Attempt 2<\/strong>.*done/s);
    expect(timeline.indexOf('Attempt 1')).toBeLessThan(timeline.indexOf('Attempt 2'));
    expect(timeline).toContain('Error: flaky: failing attempt 1 of 1');
    expect(page).toContain('0af7651916cd43dd8448eb211c80319c'); // the trace id, to search a tracing backend by
    expect(page).toContain('&lt;b&gt;10&lt;/b&gt;'); // the progress, escaped
    expect(page).not.toContain('<b>10</b>');
  });

  test('a job that does not exist is a 404 page; a bad cursor is a 400 page', async () => {
    for (const [path, status] of [['/jobs/987654321', 404], ['/jobs/abc', 404], ['/jobs?cursor=nope', 400], ['/dead?cursor=%2F%2F', 400]] as const) {
      const res = await getPage(t, path, cookie);
      expect(res.status, path).toBe(status);
      expect(res.headers.get('content-type')).toMatch(/^text\/html/);
      expect(await res.text()).toContain('class="notice error"');
    }
  });

  test('a database that does not answer: a 500 page that says little, and the cause in the log', async () => {
    const sql = createPgDriver('postgres://nobody:nothing@127.0.0.1:1/none', { connectionTimeoutMillis: 2000 });
    const app = createApp({ skiplock: createSkiplock({ sql, tasks: exampleTasks, log: () => {} }), apiToken: API_TOKEN });
    const logged: unknown[] = [];
    const original = console.error;
    console.error = (...args: unknown[]) => logged.push(args);
    try {
      const res = await app.request(new Request(`${ORIGIN}/`, { headers: { cookie } }));
      expect(res.status).toBe(500);
      expect(res.headers.get('content-type')).toMatch(/^text\/html/);
      const html = await res.text();
      expect(html).toContain('Something failed on the server');
      expect(html).not.toMatch(/ECONNREFUSED|127\.0\.0\.1/);
    } finally {
      console.error = original;
      await sql.close();
    }
    expect(logged).toHaveLength(1);
  });

  test('a payload, a task filter and a notice that hold HTML are shown as text', async () => {
    const evil = `<script>alert("x")</script><img src=x onerror=alert(1)>"'&`;
    const job = await t.skiplock.enqueue({ task: 'echo', payload: { message: evil }, delayMs: 3_600_000 });
    const page = await (await getPage(t, `/jobs/${job.id}`, cookie)).text();
    expect(page).not.toContain('<script>alert');
    expect(page).not.toContain('<img src=x');
    expect(page).toContain('&lt;script&gt;alert(\\&quot;x\\&quot;)&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;\\&quot;&#39;&amp;');
    expect(page.match(/<script/g)).toHaveLength(1);

    const filtered = await (await getPage(t, `/jobs?task=${encodeURIComponent(evil)}`, cookie)).text();
    expect(filtered).not.toContain('<script>alert');
    expect(filtered).toContain('<option value="&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;');
    expect(filtered.match(/<script/g)).toHaveLength(1);

    const notice = await (await getPage(t, `/jobs?notice=${encodeURIComponent(evil)}&job=${encodeURIComponent(evil)}`, cookie)).text();
    expect(notice).not.toContain('class="notice');
    const next = await (await getPage(t, `/login?next=${encodeURIComponent(`/"><script>alert(1)</script>`)}`)).text();
    expect(next).toContain('name="next" value="/&quot;&gt;&lt;script&gt;alert(1)&lt;/script&gt;"');
    expect(next.match(/<script/g)).toBeNull();
  });

  test('the overview counts by status and task and flags dead jobs and a stuck queue', async () => {
    const t2 = await createTestApp();
    try {
      const session = await logIn(t2);
      const calm = await (await getPage(t2, '/', session)).text();
      expect(calm).toContain('All clear');
      await t2.skiplock.enqueue({ task: 'poison', payload: {} });
      await t2.skiplock.enqueue({ task: 'echo', payload: { message: 'a' } });
      await t2.skiplock.tick({ untilIdle: true, budgetMs: 20_000, pollIntervalMs: 10 });
      await t2.skiplock.enqueue({ task: 'echo', payload: { message: 'waiting' }, runAt: new Date(Date.now() - 15 * 60_000).toISOString() });
      const html = await (await getPage(t2, '/', session)).text();
      expect(html).not.toContain('All clear');
      expect(html).toContain('1 dead job');
      expect(html).toContain('Queue is falling behind');
      expect(html).toMatch(/<a class="stat dead alert-bad" href="\/dead">/);
      expect(html).toMatch(/<a class="stat lag alert-bad"/);
      expect(html).toContain('<a href="/jobs?status=DEAD&amp;task=poison">1</a>');
      expect(html).toMatch(/<svg viewBox="0 0 1100 200" role="img" aria-label="1 job done, 0 retrying and 1 dead over the last 60 minutes">/);
    } finally {
      await t2.close();
    }
  });

  test('schedules show their next and last firing; a dead last run and a silent schedule stand out', async () => {
    const t2 = await createTestApp();
    try {
      const session = await logIn(t2);
      let clock = new Date(Date.now() - 30 * 60_000);
      const past = createSkiplock({ sql: t2.db.sql, tasks: exampleTasks, log: () => {}, now: () => clock });
      await past.putSchedule('poison-every-minute', { cron: '* * * * *', task: 'poison', payload: {} });
      clock = new Date(clock.getTime() + 61_000);
      await past.tick({ untilIdle: true, budgetMs: 20_000, pollIntervalMs: 10 });
      // Nothing ticks after that: half an hour later both schedules are overdue.
      await t2.skiplock.putSchedule('nightly', { daily: ['03:00'], task: 'echo', payload: { message: 'n' }, enabled: false });
      const html = await (await getPage(t2, '/schedules', session)).text();
      expect(html).toMatch(/data-schedule="poison-every-minute"[^]*?<span class="badge tone-bad">silent<\/span>/);
      expect(html).toContain('<span class="badge status-dead">DEAD</span>');
      expect(html).toMatch(/data-schedule="nightly"[^]*?<span class="badge tone-muted">disabled<\/span>/);
      const overview = await (await getPage(t2, '/', session)).text();
      expect(overview).toContain('Schedule poison-every-minute');
    } finally {
      await t2.close();
    }
  });
});

describe('schedules, a page at a time', () => {
  test('100 a page by name, with a link to the next; a cursor no schedule can have is a 400 page, not a 500', async () => {
    const t2 = await createTestApp();
    try {
      const session = await logIn(t2);
      const names = Array.from({ length: 101 }, (_, i) => `tenant-${String(i).padStart(3, '0')}`);
      for (const name of names) await t2.skiplock.putSchedule(name, { daily: ['03:00'], task: 'echo', payload: { message: name } });
      const first = await (await getPage(t2, '/schedules', session)).text();
      expect(first.match(/data-schedule="/g)).toHaveLength(100);
      expect(first).toContain('<a href="/schedules?cursor=tenant-099" rel="next">More »</a>');
      const second = await (await getPage(t2, '/schedules?cursor=tenant-099', session)).text();
      expect([...second.matchAll(/data-schedule="([^"]+)"/g)].map((m) => m[1])).toEqual(['tenant-100']);
      expect(second).not.toContain('rel="next"');
      expect((await getPage(t2, '/schedules?cursor=%00', session)).status).toBe(400);
      // Filtered by the start of the name; the pager keeps the filter.
      const filtered = await (await getPage(t2, '/schedules?prefix=tenant-05', session)).text();
      expect([...filtered.matchAll(/data-schedule="([^"]+)"/g)].map((m) => m[1])).toEqual(Array.from({ length: 10 }, (_, i) => `tenant-05${i}`));
      expect(filtered).toContain('<input type="text" name="prefix" value="tenant-05"');
      const none = await (await getPage(t2, '/schedules?prefix=nobody', session)).text();
      expect(none).toContain('No schedules with names that start with this.');
    } finally {
      await t2.close();
    }
  });
});

describe('one clock', () => {
  test('ages and silent schedules are measured on the database clock, not the JavaScript one', async () => {
    // The app's clock (what SQL sees) is a year ahead of this process's Date.now().
    const ahead = new Date(Date.now() + 365 * 24 * 3600_000);
    const t2 = await createTestApp({ skiplock: { now: () => ahead } });
    try {
      const session = await logIn(t2);
      const past = createSkiplock({ sql: t2.db.sql, tasks: exampleTasks, log: () => {}, now: () => new Date(ahead.getTime() - 30 * 60_000) });
      await past.putSchedule('minutely', { cron: '* * * * *', task: 'echo', payload: { message: 'm' } });
      // By the database's clock its next run was half an hour ago: silent. By Date.now() it is a year away.
      const html = await (await getPage(t2, '/schedules', session)).text();
      expect(html).toMatch(/data-schedule="minutely"[^]*?<span class="badge tone-bad">silent<\/span>/);
    } finally {
      await t2.close();
    }
  });
});

describe('activity (the chart\'s numbers)', () => {
  test('per minute, by the minute each job finished or last failed, zeros included', async () => {
    const t2 = await createTestApp();
    try {
      const end = new Date('2030-01-01T12:00:30Z');
      let clock = end;
      const at = (minutesBefore: number) => (clock = new Date(end.getTime() - minutesBefore * 60_000));
      const skiplock = createSkiplock({ sql: t2.db.sql, tasks: exampleTasks, log: () => {}, now: () => clock });
      const run = () => skiplock.tick({ untilIdle: true, budgetMs: 20_000, pollIntervalMs: 10 });
      at(5);
      await skiplock.enqueueBatch([{ task: 'echo', payload: { message: 'a' } }, { task: 'echo', payload: { message: 'b' } }, { task: 'poison', payload: {} }]);
      await run();
      at(2);
      await skiplock.enqueue({ task: 'flaky', payload: { failTimes: 3 } });
      await run();
      at(0);
      const minutes = await skiplock.activity(10);
      expect(minutes).toHaveLength(10);
      expect(minutes[0]!.minute.toISOString()).toBe('2030-01-01T11:51:00.000Z');
      expect(minutes[9]!.minute.toISOString()).toBe('2030-01-01T12:00:00.000Z');
      const nonZero = minutes.filter((m) => m.done + m.dead + m.retrying > 0).map((m) => ({ ...m, minute: m.minute.toISOString().slice(11, 16) }));
      expect(nonZero).toEqual([
        { minute: '11:55', done: 2, dead: 1, retrying: 0 },
        { minute: '11:58', done: 0, dead: 0, retrying: 1 },
      ]);
      await expect(skiplock.activity(0)).rejects.toMatchObject({ code: 'invalid_request' });
      await expect(skiplock.activity(1441)).rejects.toMatchObject({ code: 'invalid_request' });
    } finally {
      await t2.close();
    }
  });
});
