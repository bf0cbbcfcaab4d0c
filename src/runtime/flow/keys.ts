/**
 * Flow control (task options `concurrency` and `rateLimit`): the keys a job counts against,
 * computed from its payload at enqueue, and the limits the tick passes to the claim
 * (skiplock.claim_limited, migrations/010_flow_control.sql).
 */
import { SkiplockError } from '../../core/errors.ts';
import { unstorableText } from '../../core/json.ts';
import { pruneFlowStarts, setFlowKeys, unkeyedLimitedJobs, type FlowLimitRow } from '../../store/flow.ts';
import type { Clock } from '../../store/clock.ts';
import type { Sql } from '../../store/sql.ts';
import type { Task, TaskRegistry } from '../tasks/task.ts';

export const MAX_FLOW_KEY_LENGTH = 255;

/** Whether jobs of this task are claimed by the limited path. */
export function isLimited(task: Task): boolean {
  return task.concurrency !== undefined || task.rateLimit !== undefined;
}

function keyOf(task: Task, option: 'concurrency' | 'rateLimit' | 'fairness' | 'batch', payload: unknown, path: (string | number)[]): string {
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


/** A job's keys as its row holds them (migrations 010, 022): flow control's, fair share's, its batches'. */
export interface JobKeys {
  flow_key: string | null;
  rate_key: string | null;
  /** Its fairness key (docs/flow-control.md): `fairnessKey` given at enqueue, else the task's `fairness.key`; null: none. */
  fair_key: string | null;
  /** For a task with `batch`: the key its batches are made of ('' without `batch.key`); null otherwise. */
  batch_key: string | null;
}

/**
 * Every key of a job, from its parsed payload (and the `fairnessKey` its enqueue gave, which wins
 * over the task's function): flow control's (flowKeys), the fairness key, and the batch key.
 */
export function jobKeys(task: Task, payload: unknown, path: (string | number)[] = ['payload'], fairnessKey?: string): JobKeys {
  return {
    ...flowKeys(task, payload, path),
    fair_key: task.batch !== undefined ? null : fairnessKey ?? (task.fairness?.key ? keyOf(task, 'fairness', payload, path) : null),
    batch_key: task.batch === undefined ? null : keyOf(task, 'batch', payload, path),
  };
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

const ADOPT_INTERVAL_MS = 60_000;
const ADOPT_BATCH = 1_000;
const lastAdopted = new WeakMap<TaskRegistry, number>();

/**
 * Gives flow keys to QUEUED jobs of limited tasks that have none (enqueued before the task had a
 * limit, or by a deployment without it), at most once a minute per registry: without keys the
 * limited claim never takes them. Also deletes recorded starts past their window (pruneFlowStarts).
 * A payload whose key function throws gets the key ''. Resolves
 * to how many jobs it keyed; true work only when such jobs exist.
 */
export async function adoptUnkeyedJobs(sql: Sql, registry: TaskRegistry, now: Clock = null, nowMs: number = Date.now()): Promise<number> {
  const tasks = [...registry.values()].filter(isLimited);
  if (tasks.length === 0 || nowMs - (lastAdopted.get(registry) ?? -Infinity) < ADOPT_INTERVAL_MS) return 0;
  lastAdopted.set(registry, nowMs);
  // The starts of rate-limited keys that no claim took again since their window passed.
  const rated = flowLimits(registry).filter((l) => l.rate !== undefined);
  if (rated.length > 0) await sql.query(pruneFlowStarts({ now, limits: rated, limit: 10_000 }));
  const rows = await sql.query(unkeyedLimitedJobs({ tasks: tasks.map((t) => t.name), limit: ADOPT_BATCH }));
  if (rows.length === 0) return 0;
  const jobs = rows.map((row) => {
    const task = registry.get(String(row.task))!;
    const stored = typeof row.payload === 'string' ? JSON.parse(row.payload) : row.payload;
    const parsed = task.payload.safeParse(stored);
    let keys: { flow_key: string | null; rate_key: string | null };
    try {
      keys = flowKeys(task, parsed.success ? parsed.data : stored);
    } catch {
      keys = { flow_key: '', rate_key: '' };
    }
    return { id: String(row.id), flow_key: keys.flow_key ?? '', rate_key: keys.rate_key ?? '' };
  });
  // A full batch: more may wait; the next tick takes them without waiting a minute.
  if (rows.length === ADOPT_BATCH) lastAdopted.delete(registry);
  return (await sql.query(setFlowKeys({ jobs }))).length;
}
