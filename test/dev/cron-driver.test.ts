/**
 * The local cron driver (`skiplock dev --cron`, `npm start`): which URL it calls for a Worker
 * (wrangler's scheduled endpoint, falling back to `/__scheduled`) or a tick route (with the cron
 * secret), that it waits for an app started after it, and that it keeps calling on the interval.
 */
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { afterEach, expect, test } from 'vitest';
import { freePort } from '../../src/dev/embedded-postgres.ts';
import { cronTarget, startCronDriver, type CronDriver } from '../../src/dev/cron-driver.ts';

let driver: CronDriver | undefined;
let server: Server | undefined;
afterEach(async () => {
  driver?.stop();
  await new Promise((done) => (server ? server.close(done) : done(undefined)));
  server = driver = undefined;
});

/** A stand-in app on `port`: answers `answer(request)` and records each request. */
function serve(port: number, answer: (request: IncomingMessage) => number): Promise<IncomingMessage[]> {
  const seen: IncomingMessage[] = [];
  server = createServer((request, response) => {
    seen.push(request);
    response.writeHead(answer(request)).end('ok');
  });
  return new Promise((done) => server!.listen(port, '127.0.0.1', () => done(seen)));
}

async function until(check: () => boolean, ms = 5_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 20));
  }
}

test('--cron URL: an origin is a Worker, any other path a tick route', () => {
  expect(cronTarget('http://127.0.0.1:8787', 's')).toEqual({ kind: 'worker', origin: 'http://127.0.0.1:8787' });
  expect(cronTarget('http://127.0.0.1:8787/', 's')).toEqual({ kind: 'worker', origin: 'http://127.0.0.1:8787' });
  expect(cronTarget('http://localhost:3000/api/skiplock/v1/tick', 's')).toEqual({ kind: 'tick-route', url: 'http://localhost:3000/api/skiplock/v1/tick', cronSecret: 's' });
});

test('a Worker: waits for wrangler to start, then calls its scheduled endpoint (or /__scheduled) every interval', async () => {
  const port = await freePort();
  const logs: string[] = [];
  driver = startCronDriver(cronTarget(`http://127.0.0.1:${port}`, ''), { log: (m) => logs.push(m), intervalMs: 400, retryMs: 100 });
  await new Promise((r) => setTimeout(r, 250)); // nothing listens yet: the driver keeps trying
  expect(logs.some((m) => m.includes('waiting for'))).toBe(true);

  // A wrangler whose /cdn-cgi/handler/scheduled is not there (older, or a route of the app): /__scheduled is used.
  const seen = await serve(port, (request) => (request.url!.startsWith('/__scheduled') ? 200 : 404));
  await until(() => seen.filter((r) => r.url!.startsWith('/__scheduled')).length >= 3);
  expect(seen[0]!.url).toBe('/cdn-cgi/handler/scheduled?cron=*+*+*+*+*');
  expect(seen.filter((r) => r.url!.startsWith('/cdn-cgi/')).length).toBe(1); // asked once, then remembered
  expect(seen.at(-1)!.url).toBe('/__scheduled?cron=*+*+*+*+*');
  expect(logs.filter((m) => m.includes('waiting for'))).toHaveLength(1); // said once, not at each try
});

test('a tick route: GET with Authorization: Bearer <CRON_SECRET>', async () => {
  const port = await freePort();
  const seen = await serve(port, () => 200);
  const calls: number[] = [];
  driver = startCronDriver(cronTarget(`http://127.0.0.1:${port}/api/skiplock/v1/tick`, 'the-secret'), { log: () => {}, intervalMs: 300, onCall: ({ status }) => calls.push(status) });
  await until(() => calls.length >= 2);
  expect(seen[0]!.method).toBe('GET');
  expect(seen[0]!.url).toBe('/api/skiplock/v1/tick');
  expect(seen[0]!.headers.authorization).toBe('Bearer the-secret');
});

test('a call that takes long does not hold back the next one', async () => {
  const port = await freePort();
  const seen: number[] = [];
  server = createServer((_request, response) => {
    seen.push(Date.now());
    setTimeout(() => response.writeHead(200).end(), 2_000); // an invocation ticking for a while
  });
  await new Promise<void>((done) => server!.listen(port, '127.0.0.1', done));
  driver = startCronDriver(`http://127.0.0.1:${port}`, { log: () => {}, intervalMs: 300 });
  await until(() => seen.length >= 3);
  // Three calls in about 0.6 s, each answered only after 2 s.
  expect(seen.at(-1)! - seen[0]!).toBeLessThan(1_900);
  driver.stop();
  server.closeAllConnections();
});
