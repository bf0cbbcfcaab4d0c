/**
 * A local stand-in for the Vercel Queue Service, so that the real `@vercel/queue` SDK can run
 * without Vercel (tests, benchmarks, local runs), as the local Neon proxy stands in for Neon.
 * The SDK's own "local dev mode" still sends to Vercel's service (and needs its credentials); its
 * client takes `token` and `resolveBaseUrl` instead, and skiplock passes them from
 * SKIPLOCK_QUEUE_TOKEN and SKIPLOCK_QUEUE_URL (= this service's `url`).
 *
 * What it implements is what the SDK calls for a push consumer, as read from @vercel/queue 0.6.0:
 *
 *  - `POST /api/v3/topic/<topic>`: a send. Body: the payload (any content type); headers
 *    `Authorization: Bearer <token>`, `Vqs-Delay-Seconds`, `Vqs-Retention-Seconds` (60 s–24 h,
 *    default 24 h; the delay cannot exceed it), `Vqs-Idempotency-Key` (≤ 256 characters: a second
 *    send with a key seen within the message's retention returns the first message's id and
 *    delivers nothing more). Answer 201 `{ messageId }`.
 *  - at the delay's end, a push to the topic's consumer URL as Vercel's binary CloudEvent
 *    (`ce-type: com.vercel.queue.v2beta`, `ce-vqsqueuename`, `ce-vqsconsumergroup`,
 *    `ce-vqsmessageid`, `ce-vqsreceipthandle`, `ce-vqsdeliverycount`, `ce-vqscreatedat`,
 *    `ce-vqsexpiresat`, `ce-vqsvisibilitydeadline`; the payload as the body) — the "small body"
 *    mode, where the SDK's handleCallback takes the payload from the request;
 *  - `DELETE /api/v3/topic/<topic>/consumer/<group>/lease/<receipt>`: the acknowledgement;
 *  - `PATCH` on the same path, `{ visibilityTimeoutSeconds }`: the lease extended (the SDK does
 *    this while a handler runs long).
 *
 * A message not acknowledged by its visibility deadline (the push failed, answered non-2xx, or the
 * handler never acknowledged) is pushed again then, until its retention ends. Not implemented:
 * batch sends, polling receives and receive-by-id (the SDK's v1 callbacks and large bodies), which
 * skiplock does not use; they answer 501. The real service has no signature on its pushes either:
 * a consumer function is reachable from Vercel's network, and skiplock signs its own payload.
 */
import { randomUUID } from 'node:crypto';
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface QueueServiceOptions {
  /** Where each topic's messages are pushed: a URL per topic, or one function. */
  consumers: Record<string, string> | ((topic: string) => string | undefined);
  /** The bearer token sends and acknowledgements must carry. Default: a random one (see `token`). */
  token?: string;
  /** Port to listen on (0 = a free port). Default 0. */
  port?: number;
  /** Host to bind. Default '127.0.0.1'. */
  host?: string;
  /** The lease a push gives its consumer, in seconds, before the message is pushed again. Default 60 (Vercel's default visibility timeout). */
  visibilityTimeoutSeconds?: number;
  /** The consumer group named in pushes. Default 'skiplock'. */
  consumerGroup?: string;
  /** Where the service reports (a failed push). Default: nothing. */
  log?: (message: string) => void;
}

export interface QueueMessage {
  id: string;
  topic: string;
  payload: Buffer;
  contentType: string;
  idempotencyKey: string | undefined;
  delaySeconds: number;
  createdAt: number;
  visibleAt: number;
  expiresAt: number;
  deliveries: number;
  receiptHandle: string | undefined;
  acknowledged: boolean;
}

export interface QueueService {
  /** The base URL to give the SDK (`resolveBaseUrl: () => new URL(url)`, or SKIPLOCK_QUEUE_URL). */
  url: string;
  token: string;
  /** Every message accepted, in order (duplicates by idempotency key are not messages). */
  messages(): QueueMessage[];
  /** Sends answered, duplicates included; duplicates; pushes made; acknowledgements. */
  stats(): { sends: number; duplicates: number; pushes: number; acks: number };
  close(): Promise<void>;
}

const MAX_RETENTION_SECONDS = 86_400;

export async function startQueueService(options: QueueServiceOptions): Promise<QueueService> {
  const token = options.token ?? randomUUID();
  const visibilityMs = (options.visibilityTimeoutSeconds ?? 60) * 1000;
  const group = options.consumerGroup ?? 'skiplock';
  const log = options.log ?? (() => {});
  const consumerOf = typeof options.consumers === 'function' ? options.consumers : (topic: string) => (options.consumers as Record<string, string>)[topic];
  const messages: QueueMessage[] = [];
  const byKey = new Map<string, QueueMessage>();
  const byReceipt = new Map<string, QueueMessage>();
  const timers = new Map<string, NodeJS.Timeout>();
  const stats = { sends: 0, duplicates: 0, pushes: 0, acks: 0 };
  let closed = false;

  const schedule = (message: QueueMessage, atMs: number) => {
    clearTimeout(timers.get(message.id));
    if (closed || message.acknowledged || atMs >= message.expiresAt) return void timers.delete(message.id);
    timers.set(message.id, setTimeout(() => void push(message), Math.max(0, atMs - Date.now())));
  };

  async function push(message: QueueMessage): Promise<void> {
    if (closed || message.acknowledged) return;
    const consumer = consumerOf(message.topic);
    message.deliveries += 1;
    const receipt = randomUUID();
    if (message.receiptHandle) byReceipt.delete(message.receiptHandle);
    message.receiptHandle = receipt;
    byReceipt.set(receipt, message);
    const deadline = Date.now() + visibilityMs;
    // Pushed again at the deadline unless acknowledged (or its lease is extended) before.
    schedule(message, deadline);
    if (!consumer) return log(`no consumer for topic ${message.topic}: message ${message.id} waits`);
    stats.pushes += 1;
    try {
      const response = await fetch(consumer, {
        method: 'POST',
        headers: {
          'content-type': message.contentType,
          'ce-specversion': '1.0',
          'ce-type': 'com.vercel.queue.v2beta',
          'ce-source': `/topic/${message.topic}/consumer/${group}`,
          'ce-id': message.id,
          'ce-vqsqueuename': message.topic,
          'ce-vqsconsumergroup': group,
          'ce-vqsmessageid': message.id,
          'ce-vqsreceipthandle': receipt,
          'ce-vqsdeliverycount': String(message.deliveries),
          'ce-vqscreatedat': new Date(message.createdAt).toISOString(),
          'ce-vqsexpiresat': new Date(message.expiresAt).toISOString(),
          'ce-vqsvisibilitydeadline': new Date(deadline).toISOString(),
        },
        body: new Uint8Array(message.payload),
      });
      await response.text();
      if (!response.ok) log(`push of message ${message.id} answered ${response.status}: pushed again at its visibility deadline`);
    } catch (error) {
      log(`push of message ${message.id} failed (${String(error)}): pushed again at its visibility deadline`);
    }
  }

  const server = http.createServer((req, res) => {
    handle(req, res).catch((error: unknown) => reply(res, 500, { error: String(error) }));
  });

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://stand-in');
    const parts = url.pathname.split('/').filter(Boolean).map(decodeURIComponent);
    if (parts[0] !== 'api' || parts[1] !== 'v3' || parts[2] !== 'topic' || !parts[3]) return reply(res, 404, { error: 'not found' });
    if (req.headers.authorization !== `Bearer ${token}`) return reply(res, 401, { error: 'Missing or invalid authentication token' });
    const topic = parts[3];
    const body = await readBody(req);
    if (parts.length === 4 && req.method === 'POST') return send(topic, body, req, res);
    if (parts.length === 8 && parts[4] === 'consumer' && parts[6] === 'lease') {
      const message = byReceipt.get(parts[7]!);
      if (!message || message.topic !== topic || message.acknowledged) return reply(res, 404, { error: 'receipt handle not found' });
      if (req.method === 'DELETE') {
        message.acknowledged = true;
        stats.acks += 1;
        clearTimeout(timers.get(message.id));
        timers.delete(message.id);
        return reply(res, 204);
      }
      if (req.method === 'PATCH') {
        const seconds = Number((JSON.parse(body.toString('utf8') || '{}') as { visibilityTimeoutSeconds?: unknown }).visibilityTimeoutSeconds);
        if (!Number.isInteger(seconds) || seconds < 0 || seconds > 3_600) return reply(res, 400, { error: 'visibilityTimeoutSeconds must be an integer from 0 to 3600' });
        schedule(message, Date.now() + seconds * 1000);
        return reply(res, 200, {});
      }
    }
    return reply(res, 501, { error: `the local Queue Service stand-in does not implement ${req.method} ${url.pathname}` });
  }

  function send(topic: string, body: Buffer, req: IncomingMessage, res: ServerResponse): void {
    if (!/^[A-Za-z0-9_-]+$/.test(topic)) return reply(res, 400, { error: 'topic must match [A-Za-z0-9_-]+' });
    const header = (name: string) => {
      const value = req.headers[name];
      return Array.isArray(value) ? value[0] : value;
    };
    const retention = header('vqs-retention-seconds') === undefined ? MAX_RETENTION_SECONDS : Number(header('vqs-retention-seconds'));
    if (!Number.isInteger(retention) || retention < 60 || retention > MAX_RETENTION_SECONDS) return reply(res, 400, { error: 'Vqs-Retention-Seconds must be an integer from 60 to 86400' });
    const delay = header('vqs-delay-seconds') === undefined ? 0 : Number(header('vqs-delay-seconds'));
    if (!Number.isInteger(delay) || delay < 0 || delay > retention) return reply(res, 400, { error: 'Vqs-Delay-Seconds must be an integer from 0 to the retention' });
    const key = header('vqs-idempotency-key');
    if (key !== undefined && (key.length === 0 || key.length > 256)) return reply(res, 400, { error: 'Vqs-Idempotency-Key must be 1 to 256 characters' });
    stats.sends += 1;
    const now = Date.now();
    const seen = key === undefined ? undefined : byKey.get(`${topic}\n${key}`);
    if (seen && seen.expiresAt > now) {
      stats.duplicates += 1;
      return reply(res, 201, { messageId: seen.id });
    }
    const message: QueueMessage = {
      id: `msg_${randomUUID().replaceAll('-', '')}`,
      topic,
      payload: body,
      contentType: header('content-type') ?? 'application/octet-stream',
      idempotencyKey: key,
      delaySeconds: delay,
      createdAt: now,
      visibleAt: now + delay * 1000,
      expiresAt: now + retention * 1000,
      deliveries: 0,
      receiptHandle: undefined,
      acknowledged: false,
    };
    messages.push(message);
    if (key !== undefined) byKey.set(`${topic}\n${key}`, message);
    schedule(message, message.visibleAt);
    return reply(res, 201, { messageId: message.id });
  }

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, options.host ?? '127.0.0.1', () => resolve());
  });
  const address = server.address() as AddressInfo;
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return {
    url: `http://${host}:${address.port}`,
    token,
    messages: () => [...messages],
    stats: () => ({ ...stats }),
    async close() {
      closed = true;
      for (const timer of timers.values()) clearTimeout(timer);
      timers.clear();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

function reply(res: ServerResponse, status: number, body?: unknown): void {
  if (body === undefined) return void res.writeHead(status).end();
  res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
}

function readBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}
