/**
 * The CLI's `events` commands: `events send <name> [data-json]` (and the line it says when the
 * event's `on:` jobs are left pending for another deployment) and `events list`.
 */
import type { Skiplock } from '../runtime/skiplock.ts';
import { eventToJson } from '../runtime/events/index.ts';
import { expectArgs, integer, UsageError, type Values } from './args.ts';

/** `events send <name> [data-json]` and `events list`. */
export async function runEvents(skiplock: Skiplock, args: string[], values: Values, woken: boolean): Promise<unknown> {
  const [sub, ...rest] = args;
  if (sub === 'send') {
    if (rest.length < 1 || rest.length > 2) throw new UsageError('events send takes <name> and an optional data (JSON)');
    let data: unknown;
    if (rest[1] !== undefined) {
      try {
        data = JSON.parse(rest[1]);
      } catch {
        throw new UsageError('the data must be JSON');
      }
    }
    const { created, ...event } = await skiplock.sendEvent({
      name: rest[0]!,
      ...(values.key !== undefined && { key: values.key }),
      ...(data !== undefined && { data }),
      ...(values['idempotency-key'] !== undefined && { idempotencyKey: values['idempotency-key'] }),
    });
    // Tasks another deployment defines with on: this name: that deployment starts their jobs, not this CLI.
    if (created && event.pending > 0 && !woken)
      process.stderr.write(
        `skiplock: ${event.pending} on: job${event.pending === 1 ? '' : 's'} of this event ${event.pending === 1 ? 'is' : 'are'} pending: the deployment that registered ${event.pending === 1 ? 'its task' : 'their tasks'} starts ${event.pending === 1 ? 'it' : 'them'} at its next tick (to tick now: set SKIPLOCK_URL and API_TOKEN so the CLI wakes it, or POST /v1/wake on it)\n`,
      );
    return { event, created };
  }
  if (sub === 'list') {
    expectArgs(rest, 0);
    const page = await skiplock.listEvents({
      ...(values.name !== undefined && { name: values.name }),
      ...(values.key !== undefined && { key: values.key }),
      ...(values.limit !== undefined && { limit: integer(values.limit, '--limit') }),
      ...(values.cursor !== undefined && { cursor: values.cursor }),
    });
    return { events: page.events.map(eventToJson), nextCursor: page.nextCursor };
  }
  throw new UsageError('events takes send or list');
}
