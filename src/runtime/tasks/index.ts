/**
 * Tasks: defineTask and its types, enqueue input and its checks, waiting for a job.
 *
 * The capability's public face: what the layers above the runtime (src/http, src/platform, the CLI,
 * the entry points) use of it, and nothing else. They import it from here (.dependency-cruiser.cjs,
 * runtime-through-faces); modules inside src/runtime import one another directly.
 */
export { refuseUnfittableTimeouts, toIssues } from './enqueue.ts';
export type { EnqueueResult } from './enqueue.ts';
export { enqueueInputSchema, storableInstant } from './enqueue-input.ts';
export type { EnqueueInput } from './enqueue-input.ts';
export type { EnqueueAndWaitOptions, EnqueueAndWaitResult } from './enqueue-operations.ts';
export { defineTask } from './task.ts';
export type { BatchContext, BatchItem, BatchResult } from './batch.ts';
export type { BatchOptions, BatchTaskDefinition } from './task.ts';
export type { CancelOnEvent, StepContext, Task, TaskContext, TaskDefinition, WaitForEventOptions, EventAlternative, WaitForAnyOptions, AnyEvent } from './task.ts';
export type { AnyTask, EnqueueInputOf, TaskList, TaskMap, TaskName, TaskPayload, TaskPayloadOutput } from './task-types.ts';
export type { EnqueueOptions, Register, RegisteredTaskName, RegisteredTasks } from './registered.ts';
export { waitForJob } from './wait-for-job.ts';
export type { WaitResult } from './wait-for-job.ts';
