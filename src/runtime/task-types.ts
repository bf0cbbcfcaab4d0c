/**
 * Compile-time typing of enqueue by the registered tasks. Type-only: nothing here exists at run
 * time. Shared by the library (`createSkiplock({ tasks })` → `Skiplock<Tasks>`) and the typed HTTP
 * client (`createClient<typeof tasks>`).
 *
 *   const tasks = [sendEmail, resize];                     // defineTask keeps each literal name
 *   type Input = EnqueueInputOf<typeof tasks>;             // { task: 'send-email', payload: {...} } | { task: 'resize', ... }
 *   type P = TaskPayload<typeof tasks, 'send-email'>;      // z.input of its payload schema
 */
import type { z } from 'zod';
import type { EnqueueInput } from './enqueue.ts';
import type { Task } from './task.ts';

/** Any task, whatever its name and payload schema. */
export type AnyTask = Task<string, z.ZodType>;

/** What `tasks` may be: the array given to createSkiplock (`as const` is not needed). */
export type TaskList = readonly AnyTask[];

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

/** The names of the tasks, as a union of string literals (`string` for untyped tasks). */
export type TaskName<Tasks extends TaskList> = Tasks[number]['name'];

/** The tasks by name: `TaskMap<typeof tasks>['send-email']` is that task. */
export type TaskMap<Tasks extends TaskList> = { [T in Tasks[number] as T['name']]: T };

/** What enqueue accepts as the payload of task `Name` (the schema's input type). */
export type TaskPayload<Tasks extends TaskList, Name extends TaskName<Tasks>> = z.input<Extract<Tasks[number], { name: Name }>['payload']>;

/** What the handler of task `Name` receives (the schema's output type). */
export type TaskPayloadOutput<Tasks extends TaskList, Name extends TaskName<Tasks>> = z.output<Extract<Tasks[number], { name: Name }>['payload']>;

/** The options of an enqueue besides task and payload (runAt, delayMs, priority, idempotencyKey, …). */
export type EnqueueOptions = Omit<EnqueueInput, 'task' | 'payload'>;

/** `payload` may be omitted (it means `{}`) only when `{}` fits the schema. */
type PayloadField<P> = {} extends P ? { payload?: P } : { payload: P };

type InputFor<T> = T extends AnyTask ? { task: T['name'] } & PayloadField<z.input<T['payload']>> & EnqueueOptions : never;

/**
 * One enqueue, checked against the tasks: a union with one member per task, so an unknown task
 * name or a payload that does not fit the task's schema is a type error. For untyped tasks
 * (`Task[]`) it is the plain EnqueueInput.
 */
export type EnqueueInputOf<Tasks extends TaskList> = InputFor<Tasks[number]>;
