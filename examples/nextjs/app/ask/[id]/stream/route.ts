// POST /ask/:id/stream: a fresh stream URL for a job, after a reload (lib/ask-routes.ts).
import { askRoutes } from '@/lib/ask-routes';
import { skiplockRoutes } from '@/lib/skiplock';

export async function POST(request: Request): Promise<Response> {
  return (await askRoutes(request, skiplockRoutes.skiplock(), '/api/skiplock')) ?? Response.json({ error: 'not found' }, { status: 404 });
}
