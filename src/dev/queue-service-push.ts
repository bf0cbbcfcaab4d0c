/**
 * The pushes of the local Queue Service stand-in (queue-service.ts): a message's timer (at its
 * delay's end, and again at each visibility deadline until it is acknowledged or its retention
 * ends), and the push itself, a POST to the topic's consumer as Vercel's binary CloudEvent.
 */
import { randomUUID } from 'node:crypto';

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

/** What pushing needs from the service: where, as whom, for how long, and its books. */
export interface PushOptions {
  consumerOf: (topic: string) => string | undefined;
  consumerGroup: string;
  visibilityMs: number;
  log: (message: string) => void;
  /** The message each receipt handle given out names (the service looks acknowledgements up in it). */
  byReceipt: Map<string, QueueMessage>;
  stats: { pushes: number };
}

/** The service's pushes: one timer per message waiting for its next push. */
export interface Pushes extends PushOptions {
  timers: Map<string, NodeJS.Timeout>;
  closed: boolean;
}

export function createPushes(options: PushOptions): Pushes {
  return { ...options, timers: new Map(), closed: false };
}

/** The message's next push at `atMs` (replacing any before), unless it is acknowledged or expired by then. */
export function schedulePush(pushes: Pushes, message: QueueMessage, atMs: number): void {
  const { timers } = pushes;
  clearTimeout(timers.get(message.id));
  if (pushes.closed || message.acknowledged || atMs >= message.expiresAt) return void timers.delete(message.id);
  timers.set(message.id, setTimeout(() => void push(pushes, message), Math.max(0, atMs - Date.now())));
}

/** No more pushes of this message (it was acknowledged). */
export function cancelPush(pushes: Pushes, message: QueueMessage): void {
  clearTimeout(pushes.timers.get(message.id));
  pushes.timers.delete(message.id);
}

/** No more pushes at all (the service closes). */
export function stopPushes(pushes: Pushes): void {
  pushes.closed = true;
  for (const timer of pushes.timers.values()) clearTimeout(timer);
  pushes.timers.clear();
}

async function push(pushes: Pushes, message: QueueMessage): Promise<void> {
  if (pushes.closed || message.acknowledged) return;
  const { byReceipt, log } = pushes;
  const consumer = pushes.consumerOf(message.topic);
  message.deliveries += 1;
  const receipt = randomUUID();
  if (message.receiptHandle) byReceipt.delete(message.receiptHandle);
  message.receiptHandle = receipt;
  byReceipt.set(receipt, message);
  const deadline = Date.now() + pushes.visibilityMs;
  // Pushed again at the deadline unless acknowledged (or its lease is extended) before.
  schedulePush(pushes, message, deadline);
  if (!consumer) return log(`no consumer for topic ${message.topic}: message ${message.id} waits`);
  pushes.stats.pushes += 1;
  try {
    const response = await fetch(consumer, {
      method: 'POST',
      headers: cloudEventHeaders(message, pushes.consumerGroup, receipt, deadline),
      body: new Uint8Array(message.payload),
    });
    await response.text();
    if (!response.ok) log(`push of message ${message.id} answered ${response.status}: pushed again at its visibility deadline`);
  } catch (error) {
    log(`push of message ${message.id} failed (${String(error)}): pushed again at its visibility deadline`);
  }
}

/** A push's headers: Vercel's binary CloudEvent (the payload is the body). */
function cloudEventHeaders(message: QueueMessage, group: string, receipt: string, deadline: number): Record<string, string> {
  return {
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
  };
}
