/**
 * The few Workers runtime types this adapter touches, declared here instead of loading
 * @cloudflare/workers-types, whose globals would clash with Node's in the rest of the project.
 * Structurally they are subsets of the real ones.
 */
/** hono's copy of the Workers ExecutionContext (waitUntil, passThroughOnException, props). */
export type { ExecutionContext } from 'hono';

export interface ScheduledController {
  readonly scheduledTime: number;
  readonly cron: string;
}

export interface DurableObjectState {
  readonly storage: DurableObjectStorage;
}

export interface DurableObjectStorage {
  get<T = unknown>(key: string): Promise<T | undefined>;
  put<T>(key: string, value: T): Promise<void>;
  getAlarm(): Promise<number | null>;
  setAlarm(scheduledTime: number | Date): Promise<void>;
  deleteAlarm(): Promise<void>;
}

export interface DurableObjectNamespace {
  idFromName(name: string): unknown;
  get(id: unknown): { fetch(input: string, init?: RequestInit): Promise<Response> };
}
