/**
 * The routes of the streaming page (examples/node's, served here by app/ask/route.ts and
 * app/ask/[id]/stream/route.ts):
 *
 *   GET  /ask              the page (ask-page.ts)
 *   POST /ask              { question } → enqueues an `answer` job → { id, stream }
 *   POST /ask/:id/stream   a fresh stream URL for a job, after a reload → { stream }
 *
 * `stream` is skiplock's `GET /v1/jobs/:id/stream` with a short-lived read token for that job
 * only (skiplock.streamToken): the page hands it to EventSource, and never sees the API token.
 * Plain Web APIs (Request, Response): the same function serves a Worker's or a Next.js route.
 */
import type { Skiplock } from 'skiplock';
import { ASK_PAGE } from './ask-page';
import type { tasks } from './skiplock';

/** How long a read token lasts: a page that outlives it asks for another one (POST /ask/:id/stream). */
const TOKEN_TTL_MS = 5 * 60_000;

/** Answers the page's routes; undefined for any other request. `apiBase`: where skiplock's API is mounted ('' at the root). */
export async function askRoutes(request: Request, skiplock: Skiplock<typeof tasks>, apiBase = ''): Promise<Response | undefined> {
  const { pathname } = new URL(request.url);
  if (pathname === '/ask' && request.method === 'GET') return new Response(ASK_PAGE, { headers: { 'content-type': 'text/html; charset=utf-8' } });
  if (pathname === '/ask' && request.method === 'POST') {
    const body = (await request.json().catch(() => null)) as { question?: unknown } | null;
    if (typeof body?.question !== 'string' || body.question.length === 0 || body.question.length > 500) return Response.json({ error: 'a question is 1 to 500 characters' }, { status: 400 });
    const job = await skiplock.enqueue({ task: 'answer', payload: { question: body.question } });
    return Response.json({ id: job.id, stream: await streamUrl(skiplock, job.id, apiBase) }, { status: 201 });
  }
  const match = /^\/ask\/(\d{1,19})\/stream$/.exec(pathname);
  if (match && request.method === 'POST') {
    // Your app checks here that the signed-in user may read this job (say, it asked the question).
    const job = await skiplock.getJob(match[1]!);
    if (!job || job.task !== 'answer') return Response.json({ error: 'no such answer' }, { status: 404 });
    return Response.json({ stream: await streamUrl(skiplock, job.id, apiBase) });
  }
  return undefined;
}

async function streamUrl(skiplock: Skiplock<typeof tasks>, jobId: string, apiBase: string): Promise<string> {
  const token = await skiplock.streamToken(jobId, { ttlMs: TOKEN_TTL_MS });
  return `${apiBase}/v1/jobs/${jobId}/stream?${new URLSearchParams({ token })}`;
}
