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
import { cancelPush, createPushes, schedulePush, stopPushes, type Pushes, type QueueMessage } from './queue-service-push.ts';

export type { QueueMessage } from './queue-service-push.ts';

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
  const consumers = options.consumers;
  const stats = { sends: 0, duplicates: 0, pushes: 0, acks: 0 };
  const pushes = createPushes({
    consumerOf: typeof consumers === 'function' ? consumers : (topic: string) => consumers[topic],
    consumerGroup: options.consumerGroup ?? 'skiplock',
    visibilityMs: (options.visibilityTimeoutSeconds ?? 60) * 1000,
    log: options.log ?? (() => {}),
    byReceipt: new Map(),
    stats,
  });
  const service: ServiceState = { token: options.token ?? randomUUID(), messages: [], byKey: new Map(), stats, pushes };
  const server = http.createServer((req, res) => {
    handle(service, req, res).catch((error: unknown) => reply(res, 500, { error: String(error) }));
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, options.host ?? '127.0.0.1', () => resolve());
  });
  const address = server.address() as AddressInfo;
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return {
    url: `http://${host}:${address.port}`,
    token: service.token,
    messages: () => [...service.messages],
    stats: () => ({ ...service.stats }),
    async close() {
      stopPushes(service.pushes);
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** A running service's books: the messages accepted, by idempotency key too, the counts, the pushes. */
interface ServiceState {
  token: string;
  messages: QueueMessage[];
  byKey: Map<string, QueueMessage>;
  stats: { sends: number; duplicates: number; pushes: number; acks: number };
  pushes: Pushes;
}

/** Routes a request of the SDK: a send, or an acknowledgement or lease extension of a pushed message. */
async function handle(service: ServiceState, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const url = new URL(req.url ?? '/', 'http://stand-in');
  const parts = url.pathname.split('/').filter(Boolean).map(decodeURIComponent);
  if (parts[0] !== 'api' || parts[1] !== 'v3' || parts[2] !== 'topic' || !parts[3]) return reply(res, 404, { error: 'not found' });
  if (req.headers.authorization !== `Bearer ${service.token}`) return reply(res, 401, { error: 'Missing or invalid authentication token' });
  const topic = parts[3];
  const body = await readBody(req);
  if (parts.length === 4 && req.method === 'POST') return send(service, topic, body, req, res);
  if (parts.length === 8 && parts[4] === 'consumer' && parts[6] === 'lease') {
    const message = service.pushes.byReceipt.get(parts[7]!);
    if (!message || message.topic !== topic || message.acknowledged) return reply(res, 404, { error: 'receipt handle not found' });
    if (req.method === 'DELETE') return acknowledge(service, message, res);
    if (req.method === 'PATCH') return extendLease(service, message, body, res);
  }
  return reply(res, 501, { error: `the local Queue Service stand-in does not implement ${req.method} ${url.pathname}` });
}

/** A send: a new message, pushed at its delay's end; or, for an idempotency key seen within retention, the first message's id. */
function send(service: ServiceState, topic: string, body: Buffer, req: IncomingMessage, res: ServerResponse): void {
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
  const { stats, byKey } = service;
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
  service.messages.push(message);
  if (key !== undefined) byKey.set(`${topic}\n${key}`, message);
  schedulePush(service.pushes, message, message.visibleAt);
  return reply(res, 201, { messageId: message.id });
}

/** DELETE on the lease: the message is done, never pushed again. */
function acknowledge(service: ServiceState, message: QueueMessage, res: ServerResponse): void {
  message.acknowledged = true;
  service.stats.acks += 1;
  cancelPush(service.pushes, message);
  return reply(res, 204);
}

/** PATCH on the lease, `{ visibilityTimeoutSeconds }`: the next push moves to that many seconds from now. */
function extendLease(service: ServiceState, message: QueueMessage, body: Buffer, res: ServerResponse): void {
  const seconds = Number((JSON.parse(body.toString('utf8') || '{}') as { visibilityTimeoutSeconds?: unknown }).visibilityTimeoutSeconds);
  if (!Number.isInteger(seconds) || seconds < 0 || seconds > 3_600) return reply(res, 400, { error: 'visibilityTimeoutSeconds must be an integer from 0 to 3600' });
  schedulePush(service.pushes, message, Date.now() + seconds * 1000);
  return reply(res, 200, {});
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
