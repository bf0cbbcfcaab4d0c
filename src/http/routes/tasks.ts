/** /v1/tasks: each task's counts and state; pause and resume (issue 14). */
import { createRoute } from '../zod-openapi.ts';
import { taskToJson } from '../../runtime/operations/index.ts';
import type { App, RouteDeps } from '../app-types.ts';
import { TaskEnvelope, TaskList, TaskNameParam } from '../schemas/operations.ts';
import { bearerSecurity, errorResponses, jsonContent } from '../schemas/shared.ts';

const listTasksRoute = createRoute({
  method: 'get',
  operationId: 'listTasks',
  path: '/v1/tasks',
  summary: 'Tasks: counts by status, paused or active',
  description: 'Every task this deployment registers, has jobs of, or has paused.',
  tags: ['tasks'],
  security: bearerSecurity,
  responses: { 200: jsonContent(TaskList, 'The tasks, by name'), ...errorResponses(401) },
});

const pauseRoute = createRoute({
  method: 'post',
  operationId: 'pauseTask',
  path: '/v1/tasks/{name}/pause',
  summary: 'Pause a task',
  description:
    'No tick claims its jobs until it is resumed, and they do not keep a Durable Object alarm awake. Running jobs finish; its schedules keep firing into the queue; enqueues are accepted. Idempotent. ' +
    'Only a task this deployment defines or another deployment registered (each registers its tasks with its first tick, and when it migrates): any other name is refused with 404 and nothing is paused.',
  tags: ['tasks'],
  security: bearerSecurity,
  request: { params: TaskNameParam },
  responses: { 200: jsonContent(TaskEnvelope, 'Paused'), ...errorResponses(400, 401, 404) },
});

const resumeRoute = createRoute({
  method: 'post',
  operationId: 'resumeTask',
  path: '/v1/tasks/{name}/resume',
  summary: 'Resume a paused task',
  description: 'Its due jobs are claimed again from the next tick. Idempotent. Any name is accepted (unlike pause), so that a row paused under a name no deployment runs can be cleared.',
  tags: ['tasks'],
  security: bearerSecurity,
  request: { params: TaskNameParam },
  responses: { 200: jsonContent(TaskEnvelope, 'Active'), ...errorResponses(400, 401) },
});

export function registerTaskRoutes(app: App, deps: RouteDeps): void {
  const { skiplock } = deps;
  app.openapi(listTasksRoute, async (c) => c.json({ tasks: (await skiplock.listTasks()).map(taskToJson) }, 200));
  app.openapi(pauseRoute, async (c) => c.json({ task: taskToJson(await skiplock.pauseTask(c.req.valid('param').name)) }, 200));
  app.openapi(resumeRoute, async (c) => {
    const task = await skiplock.resumeTask(c.req.valid('param').name);
    if (task.counts.QUEUED > 0) deps.startWork(c);
    return c.json({ task: taskToJson(task) }, 200);
  });
}
