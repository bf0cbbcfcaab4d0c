/**
 * What flow control holds back, for people (dashboard, /metrics) and for the job page's "why is
 * this job waiting". Reads only; see src/store/flow.ts.
 */
import { flowStatus, jobFlowWait } from '../../store/flow.ts';
import type { Clock } from '../../store/clock.ts';
import { toBool, toDateOrNull } from '../../store/rows.ts';
import type { Sql } from '../../store/sql.ts';
import { flowLimits } from './keys.ts';
import type { TaskRegistry } from '../tasks/task.ts';

export type FlowLimitKind = 'concurrency' | 'global' | 'rate';

export interface KeyAtLimit {
  task: string;
  kind: FlowLimitKind;
  /** The concurrency or rate key ('' for a limit without a key, and for 'global'). */
  key: string;
  /** RUNNING jobs (concurrency, global) or starts in the current window (rate). */
  inUse: number;
  limit: number;
  /** Its due QUEUED jobs. */
  waiting: number;
  /** Rate: when its next start is allowed. */
  opensAt: Date | null;
}

export interface FlowStatus {
  /** The keys at their limit (the first 200 by task, kind and key). */
  keysAtLimit: KeyAtLimit[];
  /** Per limited task of this deployment: due jobs held back by a limit, and keys at their limit by kind. */
  byTask: Record<string, { waiting: number; keysAtLimit: Record<FlowLimitKind, number> }>;
}

/** Why a QUEUED job of a limited task waits. */
export interface FlowWait {
  task: string;
  concurrencyKey: string;
  rateKey: string;
  due: boolean;
  /** Set when that limit holds it back now. */
  concurrency: { running: number; limit: number } | null;
  global: { running: number; limit: number } | null;
  rate: { starts: number; limit: number; periodMs: number; opensAt: Date | null } | null;
}

export interface FlowOperations {
  /** The keys at their concurrency or rate limit and the jobs waiting on them. */
  flowStatus(): Promise<FlowStatus>;
  /** Why a QUEUED job of a limited task waits; null for any other job. */
  flowWait(id: string): Promise<FlowWait | null>;
}

export function createFlowOperations(sql: Sql, registry: TaskRegistry, now: () => Clock): FlowOperations {
  const limits = flowLimits(registry);
  return {
    async flowStatus() {
      const status: FlowStatus = { keysAtLimit: [], byTask: {} };
      for (const l of limits) status.byTask[l.task] = { waiting: 0, keysAtLimit: { concurrency: 0, global: 0, rate: 0 } };
      if (limits.length === 0) return status;
      for (const row of await sql.query(flowStatus({ now: now(), limits }))) {
        const task = String(row.task);
        const kind = String(row.kind);
        const counts = status.byTask[task];
        if (!counts) continue;
        if (kind === 'waiting') counts.waiting = Number(row.waiting);
        else if (kind.startsWith('at_limit:')) counts.keysAtLimit[kind.slice('at_limit:'.length) as FlowLimitKind] = Number(row.in_use);
        else
          status.keysAtLimit.push({
            task,
            kind: kind as FlowLimitKind,
            key: String(row.key ?? ''),
            inUse: Number(row.in_use),
            limit: Number(row.lim),
            waiting: Number(row.waiting),
            opensAt: toDateOrNull(row.opens_at),
          });
      }
      return status;
    },
    async flowWait(id) {
      if (limits.length === 0 || !/^[1-9]\d{0,18}$/.test(id)) return null;
      const [row] = await sql.query(jobFlowWait({ now: now(), id, limits }));
      if (!row) return null;
      const n = (v: unknown) => (v === null || v === undefined ? null : Number(v));
      const [limit, global, rate] = [n(row.limit), n(row.global), n(row.rate)];
      const [keyRunning, taskRunning, starts] = [Number(row.key_running), Number(row.task_running), Number(row.starts)];
      return {
        task: String(row.task),
        concurrencyKey: String(row.flow_key),
        rateKey: String(row.rate_key),
        due: toBool(row.due),
        concurrency: limit !== null && keyRunning >= limit ? { running: keyRunning, limit } : null,
        global: global !== null && taskRunning >= global ? { running: taskRunning, limit: global } : null,
        rate: rate !== null && starts >= rate ? { starts, limit: rate, periodMs: Number(row.period_ms), opensAt: toDateOrNull(row.opens_at) } : null,
      };
    },
  };
}

/** One sentence per limit holding the job back; empty when none does. */
export function describeFlowWait(wait: FlowWait): string[] {
  const key = (k: string) => (k === '' ? '' : ` of key ${JSON.stringify(k)}`);
  const reasons: string[] = [];
  if (wait.concurrency) reasons.push(`concurrency limit: ${wait.concurrency.running} of ${wait.concurrency.limit} jobs${key(wait.concurrencyKey)} are running`);
  if (wait.global) reasons.push(`concurrency limit of the task: ${wait.global.running} of ${wait.global.limit} jobs are running`);
  if (wait.rate)
    reasons.push(`rate limit: ${wait.rate.starts} of ${wait.rate.limit} starts${key(wait.rateKey)} in the last ${wait.rate.periodMs} ms${wait.rate.opensAt ? `; the next may start at ${wait.rate.opensAt.toISOString()}` : ''}`);
  return reasons;
}
