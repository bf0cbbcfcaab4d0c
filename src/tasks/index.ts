/**
 * What this project deploys: the tasks and schedules that every adapter registers — the Worker,
 * the Vercel function, the Node runner and `npm start` (the CLI takes the tasks; its ticks fire
 * no schedules, which the deployment does). Put yours here; it is the one file to edit. The
 * examples (CONTRACT.md) are there until you remove them.
 */
import type { Schedule, Task } from '../index.ts';
import { exampleSchedules, exampleTasks } from './examples.ts';

export const tasks: readonly Task[] = [...exampleTasks];

export const schedules: readonly Schedule[] = [...exampleSchedules];
