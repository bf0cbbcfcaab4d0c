/**
 * The wake state in the SkiplockTicker Durable Object's storage, with its alarm kept at the
 * instant the state says to look next (now when something is due; else the earlier of dueAt and
 * the next safety check; none when neither comes). One instance, single-threaded: every change
 * reads, merges (src/runtime/wake/state.ts) and writes under the object's input gate.
 */
import { mergeLower, mergeWrite, shouldTick, type WakeState, type WakeStore } from '../../runtime/wake/index.ts';
import type { DurableObjectStorage } from './runtime-types.ts';

const KEY = 'wake';

export function createDurableObjectWakeStore(storage: DurableObjectStorage, idleCheckMs: number, now: () => number = Date.now): WakeStore & { arm(): Promise<void> } {
  const read = async () => (await storage.get<WakeState>(KEY)) ?? null;
  /** Sets the alarm where the state says; an alarm already there is left alone (no extra write). */
  const arm = async (state: WakeState | null) => {
    const decision = shouldTick(state, now(), idleCheckMs);
    const at = decision.tick ? now() : decision.nextAtMs;
    const current = await storage.getAlarm();
    if (at === null) {
      if (current !== null) await storage.deleteAlarm();
    } else if (current === null || current !== at) {
      await storage.setAlarm(at);
    }
  };
  return {
    read,
    async lower(atMs) {
      const next = mergeLower(await read(), atMs);
      await storage.put(KEY, next);
      await arm(next);
    },
    async write(next, seenVersion) {
      const merged = mergeWrite(await read(), next, seenVersion);
      await storage.put(KEY, merged);
      await arm(merged);
    },
    /** The minute cron's check: the alarm is where the state says (a lost alarm is set again). */
    arm: async () => arm(await read()),
  };
}
