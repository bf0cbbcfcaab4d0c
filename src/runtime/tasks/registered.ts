/**
 * The types a handler's `ctx.invoke` and `ctx.enqueue` take from the project's registered tasks
 * (Register): type-only, and independent of Task itself, so task.ts can use them.
 */
import type { z } from 'zod';
import type { EnqueueInput } from './enqueue-input.ts';

/**
 * Where a project names its tasks for the types of handlers' `ctx.invoke` and `ctx.enqueue`,
 * which are written before the task list exists (docs/library.md): a map from each task's name to
 * its type.
 *
 *   declare module 'skiplock' {
 *     interface Register { tasks: { 'send-email': typeof sendEmail; resize: typeof resize } }
 *   }
 *
 * A map, not `typeof tasks`: the compiler reads only the entry a call names, so a handler may
 * return what it invokes (with the list, the handler's own task would be part of its own type).
 * Without it, ctx.invoke and ctx.enqueue accept any task name and payload (checked at run time).
 */
// eslint-disable-next-line @typescript-eslint/no-empty-object-type
export interface Register {}

/** Register's map of tasks, or never when the project declares none. */
export type RegisteredTasks = Register extends { tasks: infer Tasks } ? Tasks : never;

/** What the context's types read of a task: its name and payload schema. */
export interface TaskShape {
  name: string;
  payload: z.ZodType;
}

/** The task names ctx.invoke and ctx.enqueue accept: Register's, or any string. */
export type RegisteredTaskName = [RegisteredTasks] extends [never] ? string : keyof RegisteredTasks & string;

/** The payload of registered task `Name` as an argument list: omittable when `{}` fits; anything when untyped. */
export type RegisteredPayloadArgs<Name extends string> = [RegisteredTasks] extends [never]
  ? [payload?: unknown]
  : IsUnion<Name> extends true
    ? [payload?: unknown] // Name not inferred (a result type given as `invoke<R>`): only the name is checked
    : Name extends keyof RegisteredTasks
    ? RegisteredTasks[Name] extends TaskShape
      ? {} extends z.input<RegisteredTasks[Name]['payload']> ? [payload?: z.input<RegisteredTasks[Name]['payload']>] : [payload: z.input<RegisteredTasks[Name]['payload']>]
      : never
    : never;

type IsUnion<T, U = T> = T extends unknown ? ([U] extends [T] ? false : true) : never;

/** ctx.enqueue's input for registered task `Name` (EnqueueInput when untyped). */
export type RegisteredEnqueueInput<Name extends string> = [RegisteredTasks] extends [never]
  ? EnqueueInput
  : { task: Name } & (RegisteredPayloadArgs<Name> extends [payload: infer P] ? { payload: P } : { payload?: RegisteredPayloadArgs<Name>[0] }) & EnqueueOptions;

/** The options of an enqueue besides task and payload (runAt, delayMs, priority, idempotencyKey, …). */
export type EnqueueOptions = Omit<EnqueueInput, 'task' | 'payload'>;
