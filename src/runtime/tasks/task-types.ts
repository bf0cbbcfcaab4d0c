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
import type { EnqueueOptions } from './registered.ts';
import type { Task } from './task.ts';

/** Any task, whatever its name and payload schema. */
export type AnyTask = Task<string, z.ZodType>;

/** What `tasks` may be: the array given to createSkiplock (`as const` is not needed). */
export type TaskList = readonly AnyTask[];

export type { EnqueueOptions, Register, RegisteredEnqueueInput, RegisteredPayloadArgs, RegisteredTaskName, RegisteredTasks, TaskShape } from './registered.ts';

/** The names of the tasks, as a union of string literals (`string` for untyped tasks). */
export type TaskName<Tasks extends TaskList> = Tasks[number]['name'];

/** The tasks by name: `TaskMap<typeof tasks>['send-email']` is that task. */
export type TaskMap<Tasks extends TaskList> = { [T in Tasks[number] as T['name']]: T };

/** What enqueue accepts as the payload of task `Name` (the schema's input type). */
export type TaskPayload<Tasks extends TaskList, Name extends TaskName<Tasks>> = z.input<Extract<Tasks[number], { name: Name }>['payload']>;

/** What the handler of task `Name` receives (the schema's output type). */
export type TaskPayloadOutput<Tasks extends TaskList, Name extends TaskName<Tasks>> = z.output<Extract<Tasks[number], { name: Name }>['payload']>;

/** `payload` may be omitted (it means `{}`) only when `{}` fits the schema. */
type PayloadField<P> = {} extends P ? { payload?: P } : { payload: P };

type InputFor<T> = T extends AnyTask ? { task: T['name'] } & PayloadField<z.input<T['payload']>> & EnqueueOptions : never;

/**
 * One enqueue, checked against the tasks: a union with one member per task, so an unknown task
 * name or a payload that does not fit the task's schema is a type error. For untyped tasks
 * (`Task[]`) it is the plain EnqueueInput.
 */
export type EnqueueInputOf<Tasks extends TaskList> = InputFor<Tasks[number]>;
