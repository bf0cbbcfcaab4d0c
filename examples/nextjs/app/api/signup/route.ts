// Your own route enqueues a job; the payload is checked against the task at compile time.
import { skiplockRoutes } from '@/lib/skiplock';

export async function POST(request: Request): Promise<Response> {
  const { email } = (await request.json()) as { email: string };
  const job = await skiplockRoutes.skiplock().enqueue({ task: 'send-welcome', payload: { email } });
  return Response.json({ jobId: job.id }, { status: 202 });
}
