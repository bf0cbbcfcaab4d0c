// GET /ask: the page that streams an answer; POST /ask: asks (enqueues an `answer` job). lib/ask-routes.ts.
import { askRoutes } from '@/lib/ask-routes';
import { skiplockRoutes } from '@/lib/skiplock';

export const dynamic = 'force-dynamic';

// The page's stream URL is skiplock's own route, served at /api/skiplock (app/api/skiplock/[[...path]]),
// with a read token signed by CALLBACK_SECRET, or else API_TOKEN.
const route = async (request: Request): Promise<Response> =>
  (await askRoutes(request, skiplockRoutes.skiplock(), '/api/skiplock')) ?? Response.json({ error: 'not found' }, { status: 404 });

export const GET = route;
export const POST = route;
