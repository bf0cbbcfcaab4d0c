/**
 * GET /openapi.json and GET /docs. The document (OpenAPI 3.1, its schemas JSON Schema 2020-12) is
 * generated from the routes' zod schemas; the docs page is plain HTML rendered from it on the
 * server (no CDN, no script), so it works offline.
 *
 * 3.1 rather than 3.0: a JSON value of any kind (a job's payload, result, progress) is `{}` there,
 * and a nullable field `type: [..., 'null']`. 3.0 can only say `nullable: true`, which needs a
 * `type` beside it: Ajv and the validators and generators built on it refuse the document without.
 */
import type { App } from '../app-types.ts';
import { mountedBasePath } from '../mount.ts';

type OpenApiDocument = ReturnType<App['getOpenAPI31Document']>;

const DOCUMENT_CONFIG = {
  openapi: '3.1.0',
  info: {
    title: 'skiplock',
    version: '0.1.0',
    description: 'A job queue and cron scheduler on one PostgreSQL table. Every /v1/* route and /metrics need `Authorization: Bearer <API_TOKEN>`.',
  },
} as const;

export function registerDocsRoutes(app: App): void {
  app.openAPIRegistry.registerComponent('securitySchemes', 'bearer', {
    type: 'http',
    scheme: 'bearer',
    description: 'API_TOKEN',
  });
  app.openAPIRegistry.registerComponent('securitySchemes', 'streamToken', {
    type: 'apiKey',
    in: 'query',
    name: 'token',
    description: 'A read token from skiplock.streamToken(jobId): GET /v1/jobs/{id}/stream only, for that job only',
  });
  app.openAPIRegistry.registerComponent('securitySchemes', 'cronSecret', {
    type: 'http',
    scheme: 'bearer',
    description: 'CRON_SECRET (the tick route only)',
  });
  // Routes never change after createApp, so the document is built once per mount prefix, on first use.
  const documents = new Map<string, OpenApiDocument>();
  const getDocument = (request: Request) => {
    const basePath = mountedBasePath.get(request) ?? '';
    let document = documents.get(basePath);
    if (!document) documents.set(basePath, (document = app.getOpenAPI31Document({ ...DOCUMENT_CONFIG, servers: [server(basePath)] })));
    return document;
  };
  app.get('/openapi.json', (c) => c.json(getDocument(c.req.raw)));
  app.get('/docs', (c) => c.html(renderDocs(getDocument(c.req.raw))));
}

/**
 * This deployment, as a URL relative to the document's own (OpenAPI allows it): the host and scheme
 * are those the document was fetched from, which a proxy in front may change; the path is the
 * prefix the app is mounted under (mount, asSubApp), '/' without one.
 */
const server = (basePath: string) => ({
  url: basePath || '/',
  description: 'This deployment: the host the document was fetched from' + (basePath ? `, under ${basePath}` : ''),
});

const escapeHtml = (text: string) =>
  text.replaceAll('&', '&amp;').replaceAll('<', '&lt;').replaceAll('>', '&gt;').replaceAll('"', '&quot;');

const json = (value: unknown) => `<pre>${escapeHtml(JSON.stringify(value, null, 2))}</pre>`;

function renderDocs(doc: OpenApiDocument): string {
  // Request bodies are $refs to named schemas: show the schema itself.
  const resolve = (schema: unknown) => {
    const ref = (schema as { $ref?: string } | undefined)?.$ref;
    return ref ? (doc.components?.schemas?.[ref.replace('#/components/schemas/', '')] ?? schema) : schema;
  };
  const operations = Object.entries(doc.paths ?? {}).flatMap(([path, item]) =>
    (['get', 'put', 'post', 'patch', 'delete'] as const).flatMap((method) => {
      const op = item[method];
      if (!op) return [];
      const body = (op.requestBody as { content?: Record<string, { schema?: unknown }> } | undefined)?.content?.['application/json']?.schema;
      const responses = Object.entries(op.responses ?? {})
        .map(([status, r]) => `<li><code>${escapeHtml(status)}</code> ${escapeHtml((r as { description?: string }).description ?? '')}</li>`)
        .join('');
      const params = (op.parameters ?? []) as { name?: string; in?: string; description?: string }[];
      return [
        `<section id="${escapeHtml(`${method}-${path}`)}">
  <h2><code>${method.toUpperCase()} ${escapeHtml(path)}</code></h2>
  <p>${escapeHtml(op.summary ?? '')}${op.description ? `<br>${escapeHtml(op.description)}` : ''}</p>
  ${op.security && op.security.length > 0 ? '<p><em>Needs a bearer token.</em></p>' : '<p><em>No auth.</em></p>'}
  ${params.length > 0 ? `<p>Parameters: ${params.map((p) => `<code>${escapeHtml(`${p.name} (${p.in})`)}</code>${p.description ? ` ${escapeHtml(p.description)}` : ''}`).join(', ')}</p>` : ''}
  ${body ? `<details><summary>Request body</summary>${json(resolve(body))}</details>` : ''}
  <ul>${responses}</ul>
</section>`,
      ];
    }),
  );
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>skiplock API</title>
<style>body{font:15px/1.5 system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem}h2{font-size:1.05rem;margin-top:2rem}pre{background:#f4f4f4;padding:.5rem;overflow:auto;font-size:13px}</style>
</head><body>
<h1>${escapeHtml(doc.info.title)} API</h1>
<p>${escapeHtml(doc.info.description ?? '')} The machine-readable document is at <a href="/openapi.json">/openapi.json</a>; the schemas are under <code>components.schemas</code> there.</p>
<p>Errors: <code>{"error": {"code", "message", "issues"?}}</code>.</p>
${operations.join('\n')}
</body></html>`;
}
