/**
 * Events as a Skiplock offers them: sending one, listing the stored ones, and completing a
 * callback URL — writes that make work due, so each tells the hook — and what the ticks need from
 * events: this deployment's registration (its tasks and their `on:` names) and the dispatch of the
 * `on:` jobs other senders left pending for it. The rules are in events.ts; SQL in src/store/events.ts,
 * event-waits.ts and event-subscriptions.ts.
 */
import { completeCallback } from '../../store/event-waits.ts';
import { registerTasks, type RegisteredTaskRow, type Subscriptions } from '../../store/event-subscriptions.ts';
import { batchDeadlockSafe } from '../../store/sql.ts';
import type { SkiplockContext } from '../context.ts';
import type { CallbackSigner } from './callback-token.ts';
import { dispatchPendingWith, listEventsWith, registrationRows, sendEventWith, subscriptions, type SendEventInput, type SendEventResult, type StoredEvent } from './events.ts';
import { callbackDataText } from '../steps/event-waits.ts';

export interface EventOperations {
  sendEvent(input: SendEventInput): Promise<SendEventResult>;
  listEvents(query?: { name?: string; key?: string; cursor?: string; limit?: number }): Promise<{ events: StoredEvent[]; nextCursor: string | null }>;
  isCallbackToken(token: string): Promise<boolean>;
  completeCallback(token: string, data: unknown): Promise<'completed' | 'used' | 'unknown'>;
}

/** `callbacks`: the signer of callback tokens (the `callbacks` option); undefined: no callback URL is this deployment's. */
export function createEventOperations(ctx: SkiplockContext, callbacks: CallbackSigner | undefined): EventOperations {
  const { sql, registry, now } = ctx;
  return {
    // A send that woke or started jobs (or asked RUNNING ones to stop), or left on: jobs for the
    // deployment that defines them (pending), makes due work now.
    sendEvent: async (input) =>
      ctx.after(await sendEventWith(sql, registry, now(), input, await ctx.traceparent()), (r) => (r.woken + r.started + r.cancelled + r.pending > 0 ? undefined : null)),
    listEvents: (query = {}) => listEventsWith(sql, query),
    isCallbackToken: async (token) => typeof token === 'string' && (await callbacks?.verify(token)) != null,
    async completeCallback(token, data) {
      const named = typeof token === 'string' ? await callbacks?.verify(token) : null;
      if (!named) return 'unknown';
      const text = callbackDataText(data);
      // Its write locks the step, then the job; a restart locks the job, then its steps: on a deadlock, sent again.
      const [answer] = await batchDeadlockSafe(sql, [completeCallback({ now: now(), jobId: named.jobId, id: named.stepId, data: text })]);
      const row = answer?.[0];
      if (Number(row?.completed ?? 0) === 1) return ctx.after('completed' as const, () => undefined);
      return row?.status === null || row?.status === undefined ? 'unknown' : 'used';
    },
  };
}

/**
 * This deployment's tasks and their on: names, registered by the first claim of this instance
 * (or by migrate): how another sender's event finds the jobs it leaves to this deployment.
 */
export interface TaskRegistration {
  readonly rows: readonly RegisteredTaskRow[];
  needed(): boolean;
  done(): void;
}

export function createRegistration({ registry }: Pick<SkiplockContext, 'registry'>): TaskRegistration {
  let registered = false;
  return { rows: registrationRows(registry), needed: () => !registered, done: () => void (registered = true) };
}

/** Registers the tasks now (skiplock.migrate), unless this instance did already; a failure is logged: the first tick registers them. */
export async function registerNow(ctx: Pick<SkiplockContext, 'sql' | 'now' | 'log' | 'registry'>, registration: TaskRegistration): Promise<void> {
  if (ctx.registry.size === 0 || !registration.needed()) return;
  await ctx.sql.query(registerTasks({ now: ctx.now(), tasks: registration.rows })).then(
    registration.done,
    (error: unknown) => ctx.log('warn', 'registering the tasks failed; the first tick registers them', { error: String(error) }),
  );
}

/** What the ticks dispatch (TickDeps.events): the `on:` subscriptions and the pending jobs of other senders. */
export interface EventDispatch {
  subscriptions: Subscriptions;
  dispatch(): Promise<{ started: number; more: boolean }>;
}

/** With `on:` tasks, their dispatch; undefined for a deployment without any. */
export function createEventDispatch({ sql, registry, now }: Pick<SkiplockContext, 'sql' | 'registry' | 'now'>): EventDispatch | undefined {
  const onSubscriptions = subscriptions(registry);
  return onSubscriptions === null ? undefined : { subscriptions: onSubscriptions, dispatch: () => dispatchPendingWith(sql, registry, now()) };
}
