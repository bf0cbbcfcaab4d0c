/** Event names and keys as stored (events, waits, cancelOn), and the text PostgreSQL can store: schemas that depend on nothing of the runtime. */
import * as z from 'zod';
import { unstorableText } from '../../core/json.ts';

/** An event name: 1–200 of letters, digits and `_ . : / -` (`order.paid`, `app/user.created`). */
export const EVENT_NAME = /^[\w.:/-]{1,200}$/;

export const storableString = z.string().superRefine((text, ctx) => {
  const problem = unstorableText(text);
  if (problem) ctx.addIssue({ code: 'custom', message: problem });
});

export const eventNameSchema = z.string().regex(EVENT_NAME, { message: 'must be 1–200 of letters, digits and _ . : / -' });
export const eventKeySchema = storableString.min(1).max(255);

/** Enqueue's cancelOn: a matching event (this name, and this key if given) cancels the job. */
export const cancelOnSchema = z.array(z.strictObject({ event: eventNameSchema, key: eventKeySchema.optional() })).max(20);
