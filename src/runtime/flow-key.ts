/**
 * Flow control (task options `concurrency` and `rateLimit`): the keys a job counts against,
 * computed from its payload at enqueue, and the limits the tick passes to the claim
 * (skiplock.claim_limited, migrations/010_flow_control.sql).
 */
import { SkiplockError } from '../core/errors.ts';
import { unstorableText } from '../core/json.ts';
import type { FlowLimitRow } from '../store/jobs.ts';
import type { Task, TaskRegistry } from './task.ts';

export const MAX_FLOW_KEY_LENGTH = 255;

/** Whether jobs of this task are claimed by the limited path. */
export function isLimited(task: Task): boolean {
  return task.concurrency !== undefined || task.rateLimit !== undefined;
}

function keyOf(task: Task, option: 'concurrency' | 'rateLimit', payload: unknown, path: (string | number)[]): string {
  const key = task[option]?.key;
  if (!key) return '';
  let value: unknown;
  try {
    value = key(payload);
  } catch (error) {
    throw new SkiplockError('invalid_payload', `${task.name}: ${option}.key threw: ${String(error)}`, [{ path, message: `${option}.key threw` }]);
  }
  const problem = typeof value !== 'string' ? `must return a string, not ${value === null ? 'null' : typeof value}`
    : value.length < 1 || value.length > MAX_FLOW_KEY_LENGTH ? `must return 1–${MAX_FLOW_KEY_LENGTH} characters`
    : unstorableText(value);
  if (problem) throw new SkiplockError('invalid_payload', `${task.name}: ${option}.key ${problem}`, [{ path, message: `${option}.key ${problem}` }]);
  return value as string;
}

/**
 * The job row's flow columns: both null for a task without flow control (the plain claim path);
 * otherwise both set, '' for a limit without a key. The payload is the parsed one.
 */
export function flowKeys(task: Task, payload: unknown, path: (string | number)[] = ['payload']): { flow_key: string | null; rate_key: string | null } {
  if (!isLimited(task)) return { flow_key: null, rate_key: null };
  return { flow_key: keyOf(task, 'concurrency', payload, path), rate_key: keyOf(task, 'rateLimit', payload, path) };
}


/** The limits of the registry's limited tasks (empty when none: the claim is the plain one). */
export function flowLimits(registry: TaskRegistry): FlowLimitRow[] {
  const rows: FlowLimitRow[] = [];
  for (const task of registry.values()) {
    if (!isLimited(task)) continue;
    rows.push({
      task: task.name,
      ...(task.concurrency ? { limit: task.concurrency.limit } : {}),
      ...(task.concurrency?.globalLimit !== undefined ? { global: task.concurrency.globalLimit } : {}),
      ...(task.rateLimit ? { rate: task.rateLimit.limit, period_ms: task.rateLimit.periodMs } : {}),
    });
  }
  return rows;
}
