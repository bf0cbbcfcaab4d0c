/**
 * The input of the event waits, checked before anything is written: an event name and an optional
 * key (ctx.waitForEvent's), and ctx.waitForAny's list of them. A bad one is a TypeError that is
 * never retried (permanentTypeError), naming the call.
 */
import { permanentTypeError } from '../../core/errors.ts';
import { unstorableText } from '../../core/json.ts';
import type { EventAlternative as Checked } from '../../store/event-waits.ts';
import { EVENT_NAME } from '../events/names.ts';

/** The most alternatives one ctx.waitForAny may list (each is an index probe and a lock). */
export const MAX_ALTERNATIVES = 20;

/** `{ event, key? }` → `{ name, key }`; `what` names the call, `where` the argument in it. */
export function checkEventAndKey(what: string, value: { event?: unknown; key?: unknown }, where = ''): Checked {
  if (typeof value.event !== 'string' || !EVENT_NAME.test(value.event))
    throw permanentTypeError(`${what}: ${where}event must be an event name (1–200 of letters, digits and _ . : / -), got ${JSON.stringify(value.event)}`);
  const { key } = value;
  if (key !== undefined && (typeof key !== 'string' || key.length < 1 || key.length > 255 || unstorableText(key)))
    throw permanentTypeError(`${what}: ${where}key must be a string of 1 to 255 characters`);
  return { name: value.event, key: key ?? null };
}

/** ctx.waitForAny's alternatives: 1 to MAX_ALTERNATIVES of `{ event, key? }`, no two the same. */
export function checkAlternatives(what: string, alternatives: unknown): Checked[] {
  if (!Array.isArray(alternatives) || alternatives.length < 1 || alternatives.length > MAX_ALTERNATIVES)
    throw permanentTypeError(`${what}: the second argument must be a list of 1 to ${MAX_ALTERNATIVES} { event, key? }, got ${Array.isArray(alternatives) ? `${alternatives.length} of them` : typeof alternatives}`);
  const seen = new Set<string>();
  return alternatives.map((alternative: unknown, i) => {
    if (typeof alternative !== 'object' || alternative === null) throw permanentTypeError(`${what}: alternative ${i} must be { event, key? }`);
    const checked = checkEventAndKey(what, alternative, `alternative ${i}: `);
    const token = JSON.stringify([checked.name, checked.key]);
    if (seen.has(token)) throw permanentTypeError(`${what}: alternative ${i} (event ${JSON.stringify(checked.name)}${checked.key === null ? '' : ` key ${JSON.stringify(checked.key)}`}) is listed twice`);
    seen.add(token);
    return checked;
  });
}
