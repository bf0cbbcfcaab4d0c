// The Worker: skiplock's API and dashboard under /skiplock, its tick on the cron, and the app's own routes.
import { createWorker, type Env as SkiplockEnv } from 'skiplock/cloudflare';
import { schedules, tasks } from './tasks';

const queue = createWorker({ tasks, schedules, basePath: '/skiplock' });

export default {
  async fetch(request: Request, env: SkiplockEnv, ctx: ExecutionContext): Promise<Response> {
    if (queue.handles(request)) return queue.fetch(request, env, ctx);
    const url = new URL(request.url);
    if (request.method === 'POST' && url.pathname === '/upload') {
      const key = url.searchParams.get('key') ?? 'upload.png';
      // Typed by the tasks: a wrong task name or payload does not compile.
      const job = await queue.skiplock(env).enqueue({ task: 'resize-image', payload: { key, width: 640 } });
      return Response.json({ jobId: job.id }, { status: 202 });
    }
    return new Response('Not found', { status: 404 });
  },
  scheduled: queue.scheduled,
} satisfies ExportedHandler<SkiplockEnv>;

/** The Durable Object ticker, bound as SKIPLOCK_TICKER in wrangler.toml. */
export const SkiplockTicker = queue.Ticker;
