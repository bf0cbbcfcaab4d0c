/**
 * The Worker's side of the SkiplockTicker Durable Object (ticker.ts): its requests to the object
 * (one subrequest each) — the forwarding store through which, in alarm mode, what the Worker's
 * ticks conclude reaches the object's wake state, and the minute cron's check of its alarm.
 */
import type { WakeState, WakeStore } from '../../runtime/wake/index.ts';
import type { DurableObjectNamespace } from './runtime-types.ts';

/** What the Worker's requests need of its environment: the SKIPLOCK_TICKER binding (Env's). */
export interface TickerEnv {
  SKIPLOCK_TICKER?: DurableObjectNamespace;
}

/** What the forwarding store adds to a WakeStore: the Worker's requests to the Durable Object. */
export interface TickerForwarding {
  /**
   * Lowers the object to `atMs` before a tick claims; resolves to the store that tick concludes
   * into, whose conclusion replaces the backstop if nothing changed the object since (the
   * version it answered here), else only lowers it.
   */
  backstop(atMs: number): Promise<WakeStore>;
  /** Lowers the object to `atMs` unless this isolate told it an instant as early, still to come (not a backstop). */
  tell(atMs: number): Promise<void>;
  /** Lowers the object to now. */
  tellNow(): Promise<void>;
}

/**
 * The Worker's wake store in alarm mode: the isolate's memory, and the Durable Object's state for
 * what every tick the Worker runs concludes (a fan-out invocation's, an explicit one's: retries'
 * backoff instants, parents its children woke, leases it took). A conclusion goes to the object
 * (POST /conclude, one subrequest) when it is earlier than what this isolate last told it (or that
 * instant has passed), and only lowers the object's state. A background tick concludes through the
 * store its backstop returned, which always tells the object (raising the backstop away). A failed
 * request is logged: the object's own instants and the safety check remain.
 */
export function createTickerForwardingStore(env: TickerEnv, memory: WakeStore, now: () => number = Date.now): WakeStore & TickerForwarding {
  /**
   * What this isolate last told the object: at most that instant is the object's now (a later
   * request may only lower it), unless it was a backstop, which a conclusion may raise away.
   */
  let told: { at: number | null; backstop: boolean } | null = null;
  /** One request; resolves to the object's version after it (null: failed, logged). */
  const send = async (path: '/lower' | '/conclude', body: object, at: number | null, backstop: boolean): Promise<number | null> => {
    try {
      const { version } = (await tickerRequest(env, path, body)) as { version?: unknown };
      told = { at, backstop };
      return typeof version === 'number' ? version : null;
    } catch (error) {
      logWakeFailure(error);
      return null;
    }
  };
  const standing = () => (told !== null && told.at !== null && told.at > now() ? told : null);
  const conclude = (next: Omit<WakeState, 'version'>, seen: number) => send('/conclude', { dueAt: next.dueAt, checkedAt: next.checkedAt, seen }, next.dueAt, false);
  return {
    read: () => memory.read(),
    lower: (atMs) => memory.lower(atMs),
    async write(next, seenVersion) {
      await memory.write(next, seenVersion);
      const t = standing();
      if (next.dueAt === null || (t !== null && !t.backstop && t.at! <= next.dueAt)) return;
      await conclude(next, -1); // only lowers: this tick set no backstop
    },
    async backstop(atMs) {
      const version = await send('/lower', { at: atMs }, atMs, true);
      return {
        read: () => memory.read(),
        lower: (at) => memory.lower(at),
        async write(next, seenVersion) {
          await memory.write(next, seenVersion);
          await conclude(next, version ?? -1);
        },
      };
    },
    async tell(atMs) {
      const t = standing();
      if (t && !t.backstop && t.at! <= atMs) return;
      await send('/lower', { at: atMs }, atMs, false);
    },
    tellNow: async () => void (await send('/lower', { at: now() }, now(), false)),
  };
}

/** The minute cron's check: the Durable Object's alarm is where its wake state says (no statement). */
export async function checkTicker(env: TickerEnv): Promise<void> {
  await tickerRequest(env, '/cron', {});
}

/** One request to the SkiplockTicker (one subrequest); resolves to its JSON answer, if any. */
async function tickerRequest(env: TickerEnv, path: string, body: object): Promise<unknown> {
  const ticker = env.SKIPLOCK_TICKER!;
  const response = await ticker.get(ticker.idFromName('skiplock')).fetch(`https://ticker${path}`, { method: 'POST', body: JSON.stringify(body) });
  if (!response.ok) throw new Error(`the ticker answered HTTP ${response.status} to ${path}`);
  return response.status === 204 ? null : response.json();
}

const logWakeFailure = (error: unknown) => console.error('[skiplock] waking the ticker failed', error);
