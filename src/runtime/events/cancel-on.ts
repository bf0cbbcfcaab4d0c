/** Event names and keys, and cancelOn (defineTask's and enqueue's): what job.cancel_on holds. */
import { SkiplockError } from '../../core/errors.ts';
import { unstorableText } from '../../core/json.ts';
import type { Task } from '../tasks/task.ts';

export { cancelOnSchema, EVENT_NAME, eventKeySchema, eventNameSchema, storableString } from './names.ts';

/** The job.cancel_on entries of a job of `task` with this payload and enqueue option (null: none). */
export function cancelOnEntries(task: Task, payload: unknown, extra: readonly { event: string; key?: string | undefined }[] | undefined): string[] | null {
  const entries: string[] = [];
  for (const c of task.cancelOn ?? []) {
    const key = typeof c.key === 'function' ? c.key(payload) : c.key;
    if (key !== undefined && (typeof key !== 'string' || key.length < 1 || key.length > 255 || unstorableText(key)))
      throw new SkiplockError('invalid_payload', `${task.name}: the cancelOn key for ${c.event} must be a string of 1 to 255 characters`, [{ path: ['payload'], message: 'cancelOn key' }]);
    entries.push(key === undefined ? c.event : `${c.event} ${key}`);
  }
  for (const c of extra ?? []) entries.push(c.key === undefined ? c.event : `${c.event} ${c.key}`);
  return entries.length === 0 ? null : [...new Set(entries)];
}
