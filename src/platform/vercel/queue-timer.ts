/**
 * Vercel's timer: Vercel Queues (`@vercel/queue`). Vercel keeps no process between invocations and
 * its cron fires once a minute at best (once a day on Hobby), so work due later — a `runAt`, a
 * retry's backoff, `ctx.sleep`, an event wait's timeout — would wait for the cron. With a `queue`
 * configured, skiplock sends one delayed message per due instant to a topic whose consumer is the
 * function serving skiplock; the message arrives at the instant and its invocation ticks (the wake
 * state consulted, as the cron's). The minute cron stays the safety net.
 *
 * - An instant is armed when it lowers the earliest instant known (an enqueue, a wake) and when a
 *   tick concludes with work due later. The message's idempotency key is the instant (to the
 *   second) and its hop, so a retried send, or the same instant armed by two invocations, is
 *   delivered once; an instance also remembers what it sent and does not send it again.
 * - The delay is rounded up to the second (the message never arrives before its instant).
 *   Instants beyond `maxDelaySeconds` (the Queue Service keeps a message 24 h at most) are reached
 *   in hops: a message at T − k·maxDelay re-arms T on arrival.
 * - The payload names the instant, signed with the deployment's API_TOKEN (or CRON_SECRET): the
 *   consumer lowers the wake state to it (the message is durable where the Runtime Cache is best
 *   effort: a lower lost to a race comes back). A callback whose signature does not verify is
 *   only a wake-state-consulted tick, which costs no statement when nothing is due.
 *
 * Cost: each armed instant is a send with an idempotency key (2 operations), a push (1) and an
 * acknowledgement (1): 4 operations, $0.60 per million (docs/platforms.md).
 *
 * The consumer is recognised by the Queue Service's CloudEvent headers (`ce-type:
 * com.vercel.queue.v2beta`, `ce-vqsqueuename: <topic>`) on a POST to any path the handler serves.
 */
import { WAKE_EARLY_MS, type WakeState } from '../../runtime/wake/index.ts';
import { ConfigError } from '../env-options.ts';

/** What skiplock uses of `@vercel/queue` (pass the module: `import * as vercelQueue from '@vercel/queue'`). */
export interface VercelQueueSdk {
  QueueClient: new (options: QueueClientOptionsLike) => {
    handleCallback(handler: (message: unknown, metadata: unknown) => Promise<void>, options?: { visibilityTimeoutSeconds?: number }): (request: Request) => Promise<Response>;
  };
  PollingQueueClient: new (options: QueueClientOptionsLike & { region: string }) => {
    send(topic: string, payload: unknown, options?: { delaySeconds?: number; idempotencyKey?: string }): Promise<{ messageId: string | null }>;
  };
}

interface QueueClientOptionsLike {
  region?: string;
  token?: string;
  resolveBaseUrl?: (region: string) => URL;
  deploymentId?: string | null;
}

/** The `queue` option of createVercelHandler / createNextHandlers. */
export interface VercelQueueOptions {
  /** The `@vercel/queue` module: `import * as vercelQueue from '@vercel/queue'`, then `sdk: vercelQueue`. */
  sdk: VercelQueueSdk;
  /** The topic (`[A-Za-z0-9_-]+`); its consumer in vercel.json is skiplock's function. SKIPLOCK_QUEUE_TOPIC, else 'skiplock-wake'. */
  topic?: string;
  /** The Queue Service's region. Default VERCEL_REGION, else 'iad1'. */
  region?: string;
  /** The longest delay of one message, in seconds; later instants are reached in hops. Default 82 800 (23 h; messages live 24 h). */
  maxDelaySeconds?: number;
}

/** What the Queue Service needs besides the options: the variables a deployment has. */
export interface VercelQueueEnv {
  /** The Queue Service's base URL (the SDK adds /api/v3/…). Default Vercel's (`https://<region>.vercel-queue.com`). Local: the stand-in, src/dev/queue-service.ts. */
  SKIPLOCK_QUEUE_URL?: string;
  /** A bearer token for the Queue Service. Default the SDK's OIDC token (on Vercel). */
  SKIPLOCK_QUEUE_TOKEN?: string;
  /** The topic when the option does not name one. */
  SKIPLOCK_QUEUE_TOPIC?: string;
  VERCEL_REGION?: string;
  VERCEL_DEPLOYMENT_ID?: string;
  API_TOKEN?: string;
  CRON_SECRET?: string;
}

export const DEFAULT_QUEUE_TOPIC = 'skiplock-wake';
export const DEFAULT_MAX_DELAY_SECONDS = 82_800;
/** The Queue Service keeps a message 24 h at most, and its delay cannot exceed that. */
const MAX_RETENTION_SECONDS = 86_400;
const TOPIC = /^[A-Za-z0-9_-]+$/;
const CE_TYPE = 'com.vercel.queue.v2beta';
/** Instants an instance remembers having armed (the idempotency key covers the others). */
const MEMO_SIZE = 256;

export interface QueueTimer {
  readonly topic: string;
  /** Sends the message for `atMs` (epoch ms) unless this instance already did; never rejects (a failure is logged). */
  arm(atMs: number): Promise<void>;
  /**
   * A tick's conclusion was written: arm the instant the database gave (`written`) and the one
   * stored (`state`, earlier when a lower raced the tick) where they are due later. A stored
   * instant due now needs no message: a write that lowers to now starts its own tick.
   */
  armState(state: WakeState, written: Omit<WakeState, 'version'>): Promise<void>;
  /** Whether a request is this topic's push from the Queue Service. */
  isCallback(request: Request): boolean;
  /** Answers the push (through the SDK's handleCallback, which acknowledges the message): calls `consume`. */
  handle(request: Request): Promise<Response>;
}

export interface QueueTimerDeps {
  options: VercelQueueOptions;
  env: VercelQueueEnv;
  /** Names the deployment's wake state (wakeStateKey): part of each idempotency key. */
  stateKey: string;
  /**
   * The push's work: called with the signed instant (null when the payload does not verify); a
   * rejection makes the SDK answer 500 without acknowledging, so the message comes again.
   */
  consume: (atMs: number | null) => Promise<void>;
  now?: () => number;
  warn?: (message: string, error?: unknown) => void;
}

/** Checks the configuration (a ConfigError naming what is wrong) and builds the timer. */
export function createQueueTimer(deps: QueueTimerDeps): QueueTimer {
  const now = deps.now ?? Date.now;
  const warn = deps.warn ?? ((message, error) => console.warn(`[skiplock] ${message}`, error ?? ''));
  const { sdk, topic, maxDelaySeconds, clientOptions, region } = queueConfig(deps.options, deps.env);
  // Sends through the polling client: the same send, without the SDK's local dev mode (which,
  // under NODE_ENV=development, would also call handlers in-process). Callbacks through QueueClient.
  const sender = new sdk.PollingQueueClient({ ...clientOptions, region });
  let callback: ((request: Request) => Promise<Response>) | undefined;
  const secret = deps.env.API_TOKEN || deps.env.CRON_SECRET || '';
  const keyPrefix = `skiplock-${deps.stateKey.replace(/[^A-Za-z0-9]/g, '').slice(-16)}`;
  const arm = createArm({ sender, topic, secret, keyPrefix, maxDelaySeconds, now, warn });
  return {
    topic,
    arm,
    async armState(state, written) {
      if (written.dueAt !== null) await arm(written.dueAt);
      if (state.dueAt !== null && state.dueAt !== written.dueAt) await arm(state.dueAt);
    },
    isCallback(request) {
      return request.method === 'POST' && request.headers.get('ce-type') === CE_TYPE && request.headers.get('ce-vqsqueuename') === topic;
    },
    handle(request) {
      // Built on the first push (under NODE_ENV=development the SDK registers it for its own
      // local dev mode, which warns when vercel.json does not map the calling file).
      callback ??= new sdk.QueueClient(clientOptions).handleCallback(async (message) => deps.consume(await verified(message, secret, topic)));
      return callback(request);
    },
  };
}

/** The timer's configuration, checked: the SDK, the topic, the longest delay and the clients' options. */
function queueConfig(options: VercelQueueOptions, env: VercelQueueEnv) {
  const problem = (message: string) => new ConfigError(`queue: ${message}`);
  const sdk = options.sdk as Partial<VercelQueueSdk> | undefined;
  if (!sdk || typeof sdk.QueueClient !== 'function' || typeof sdk.PollingQueueClient !== 'function') {
    throw problem("`sdk` must be the @vercel/queue module (import * as vercelQueue from '@vercel/queue'; queue: { sdk: vercelQueue }); npm install @vercel/queue");
  }
  const topic = options.topic ?? (env.SKIPLOCK_QUEUE_TOPIC || DEFAULT_QUEUE_TOPIC);
  if (!TOPIC.test(topic)) throw problem(`the topic must match [A-Za-z0-9_-]+, got ${JSON.stringify(topic)}`);
  const maxDelaySeconds = options.maxDelaySeconds ?? DEFAULT_MAX_DELAY_SECONDS;
  if (!Number.isInteger(maxDelaySeconds) || maxDelaySeconds < 1 || maxDelaySeconds > MAX_RETENTION_SECONDS) {
    throw problem(`maxDelaySeconds must be an integer from 1 to ${MAX_RETENTION_SECONDS} (the Queue Service keeps a message 24 h), got ${JSON.stringify(options.maxDelaySeconds)}`);
  }
  let baseUrl: URL | undefined;
  if (env.SKIPLOCK_QUEUE_URL) {
    baseUrl = URL.canParse(env.SKIPLOCK_QUEUE_URL) ? new URL(env.SKIPLOCK_QUEUE_URL) : undefined;
    if (!baseUrl || !/^https?:$/.test(baseUrl.protocol)) throw problem(`SKIPLOCK_QUEUE_URL must be an http(s) URL, got ${JSON.stringify(env.SKIPLOCK_QUEUE_URL)}`);
  }
  const region = options.region ?? (env.VERCEL_REGION || 'iad1');
  if (!/^[a-z]{2,5}[0-9]{1,2}$/.test(region)) throw problem(`region must be a Vercel region code such as iad1, got ${JSON.stringify(region)}`);
  const clientOptions: QueueClientOptionsLike = {
    region,
    ...(env.SKIPLOCK_QUEUE_TOKEN ? { token: env.SKIPLOCK_QUEUE_TOKEN } : {}),
    ...(baseUrl ? { resolveBaseUrl: () => new URL(baseUrl) } : {}),
    // On Vercel a message is pinned to the deployment that sent it (the SDK's default); elsewhere
    // (next start, tests) there is no deployment to pin to.
    deploymentId: env.VERCEL_DEPLOYMENT_ID || null,
  };
  return { sdk: sdk as VercelQueueSdk, topic, maxDelaySeconds, clientOptions, region };
}

/** What arming an instant needs: the sender, the topic, the signing secret, the keys' prefix, the clock. */
interface ArmDeps {
  sender: InstanceType<VercelQueueSdk['PollingQueueClient']>;
  topic: string;
  secret: string;
  keyPrefix: string;
  maxDelaySeconds: number;
  now: () => number;
  warn: (message: string, error?: unknown) => void;
}

/** QueueTimer.arm: one delayed message per instant (in hops past maxDelaySeconds), each sent once by this instance. */
function createArm({ sender, topic, secret, keyPrefix, maxDelaySeconds, now, warn }: ArmDeps): (atMs: number) => Promise<void> {
  const maxDelayMs = maxDelaySeconds * 1000;
  const sent: string[] = [];
  // A Queue Service out of reach (`next dev` with no credentials) fails every send: said once until one succeeds.
  let failing = false;
  return async function arm(atMs: number): Promise<void> {
    if (!Number.isFinite(atMs)) return;
    const nowMs = now();
    if (atMs <= nowMs + WAKE_EARLY_MS) return; // due now: the caller's tick takes it
    // Hops: the smallest k with T − k·maxDelay within reach; each hop has its own key.
    const hops = Math.max(0, Math.ceil((atMs - nowMs) / maxDelayMs) - 1);
    const arrival = atMs - hops * maxDelayMs;
    const second = Math.ceil(atMs / 1000);
    const idempotencyKey = `${keyPrefix}-${second}-${hops}`;
    if (sent.includes(idempotencyKey)) return;
    const delaySeconds = Math.min(maxDelaySeconds, Math.max(0, Math.ceil((arrival - nowMs) / 1000)));
    try {
      await sender.send(topic, { at: atMs, sig: await sign(secret, `${topic}:${atMs}`) }, { delaySeconds, idempotencyKey });
      sent.push(idempotencyKey);
      if (sent.length > MEMO_SIZE) sent.shift();
      failing = false;
    } catch (error) {
      if (!failing) warn(`arming the Vercel Queues timer for ${new Date(atMs).toISOString()} failed; the cron will find the work (said once until a send succeeds)`, error);
      failing = true;
    }
  };
}

/** The instant a push's payload names, if its signature verifies; else null. */
async function verified(message: unknown, secret: string, topic: string): Promise<number | null> {
  if (!secret || typeof message !== 'object' || message === null) return null;
  const { at, sig } = message as Record<string, unknown>;
  if (typeof at !== 'number' || !Number.isFinite(at) || typeof sig !== 'string') return null;
  return sig === (await sign(secret, `${topic}:${at}`)) ? at : null;
}

/** HMAC-SHA-256 of `text`, hex; '' without a secret. */
async function sign(secret: string, text: string): Promise<string> {
  if (!secret) return '';
  const encoder = new TextEncoder();
  const key = await crypto.subtle.importKey('raw', encoder.encode(secret), { name: 'HMAC', hash: 'SHA-256' }, false, ['sign']);
  const mac = new Uint8Array(await crypto.subtle.sign('HMAC', key, encoder.encode(text)));
  return Array.from(mac, (b) => b.toString(16).padStart(2, '0')).join('');
}

/**
 * Whether a write's instant needs a message, given the state read after it was lowered: not when
 * the state already knows an earlier instant (that one's message comes first, and its tick's
 * conclusion arms the next). Equal counts as lowering — it may be this write's own lower — and the
 * idempotency key keeps a second send of one instant from becoming a second message.
 */
export function lowersInstant(state: WakeState | null, atMs: number): boolean {
  return state === null || state.dueAt === null || atMs <= state.dueAt;
}
