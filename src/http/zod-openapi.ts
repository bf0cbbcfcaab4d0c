/**
 * @hono/zod-openapi as skiplock's modules import it (never from the package directly). Here it is
 * the package itself; in dist/ the build (src/dev/vendor-zod-openapi.ts) writes this module as the
 * package's own code with one change: it extends zod with `{ ZodType }` instead of the whole `z`
 * namespace. That namespace as a value keeps every export of zod in a bundle (esbuild cannot
 * shake it): its 63 locales, toJSONSchema, fromJSONSchema, z.compile — over 60 KiB gzipped in a
 * Worker. `extendZodWithOpenApi` reads nothing but `ZodType`, so the behaviour is the same.
 */
export { createRoute, extendZodWithOpenApi, OpenAPIHono } from '@hono/zod-openapi';
